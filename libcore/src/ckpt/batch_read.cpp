// CheckpointReader::read_batch: a whole restore's reads in one sequential pass per rank file, the
// SHA-256 of the share's files computed on the same bytes (ReadOptions::hash_while_reading), so a
// resume reads each byte from disk once instead of hashing every file before reading it again.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <cstring>
#include <filesystem>
#include <vector>

#include "internal.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/ckpt/read.hpp"

namespace fs = std::filesystem;

namespace shardtrain::ckpt {
namespace {

// One request's part that lies in one piece: `bytes` at `address` of the piece's rank file go to `out`.
struct Segment {
  std::int64_t address = 0, bytes = 0;
  char* out = nullptr;
};

// Bytes per read: large enough for the device's sequential rate; with kAhead blocks read ahead of
// the hashing, small enough that the scratch blocks stay small (kAhead + 1 of them at most).
constexpr std::int64_t kBlock = std::int64_t(16) << 20;
constexpr std::size_t kAhead = 3;

class RankFile {
 public:
  explicit RankFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      throw IoError(path_ + ": cannot open (" + std::strerror(errno) + "); resume from an earlier checkpoint");
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // a larger read-ahead window
  }
  ~RankFile() { ::close(fd_); }
  RankFile(const RankFile&) = delete;
  RankFile& operator=(const RankFile&) = delete;

  // Exactly `bytes` at `at` into `into`.
  void read(std::int64_t at, std::int64_t bytes, char* into) const {
    for (std::int64_t got = 0; got < bytes;) {
      const ssize_t r = ::pread(fd_, into + got, std::size_t(bytes - got), off_t(at + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw IoError(path_ + ": reading " + std::to_string(bytes - got) + " bytes at " + std::to_string(at + got) +
                      (r < 0 ? std::string(" failed (") + std::strerror(errno) + ")" : std::string(" hit its end")) +
                      " (truncated or unreadable file); resume from an earlier checkpoint");
      got += r;
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// One block of a file read whole: `bytes` at `address` into `into` (a request's buffer, or scratch).
struct Block {
  std::int64_t address = 0, bytes = 0;
  char* into = nullptr;
};

// Reads `blocks` (in file order) on a thread of its own, at most kAhead blocks ahead of the caller,
// so the disk works while the caller hashes: a SHA-256 pass in series with the reads would cost
// their sum, overlapped it costs the longer of the two.
class ReadAhead {
 public:
  ReadAhead(const RankFile& file, const std::vector<Block>& blocks)
      : file_(file), blocks_(blocks), reader_([this] { run(); }) {}
  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    reader_.join();
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Block i read (blocks are taken in order, each once); rethrows the reader's error. The caller's
  // previous block is then free for the reader to reuse (its scratch).
  const Block& take(std::size_t i) {
    std::unique_lock<std::mutex> lock(mutex_);
    taken_ = i;
    changed_.notify_all();
    changed_.wait(lock, [&] { return read_ > i || error_; });
    if (read_ <= i) std::rethrow_exception(error_);
    return blocks_[i];
  }

 private:
  void run() {
    try {
      for (std::size_t i = 0; i < blocks_.size(); ++i) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          changed_.wait(lock, [&] { return stop_ || i < taken_ + kAhead; });
          if (stop_) return;
        }
        file_.read(blocks_[i].address, blocks_[i].bytes, blocks_[i].into);
        std::lock_guard<std::mutex> lock(mutex_);
        read_ = i + 1;
        changed_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
    }
  }

  const RankFile& file_;
  const std::vector<Block>& blocks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t read_ = 0, taken_ = 0;  // blocks read; the block the caller works on
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread reader_;  // last: started once the members above exist
};

// The blocks that read a whole file of `file_bytes` in order: the segments (sorted by address; one
// overlapping a segment before it goes to `again`, to be read on its own) into their buffers, the
// bytes between them into `scratch` slots (kAhead + 1 in turn: the reader is never further ahead).
std::vector<Block> whole_file_blocks(const std::vector<Segment>& segments, std::int64_t file_bytes,
                                     std::vector<std::vector<char>>& scratch, std::vector<const Segment*>& again) {
  std::vector<Block> blocks;
  scratch.resize(kAhead + 1);
  std::int64_t at = 0;
  auto add = [&](std::int64_t address, std::int64_t bytes, char* into) {
    for (std::int64_t done = 0; done < bytes; done += kBlock) {
      const std::int64_t n = std::min(kBlock, bytes - done);
      char* target = into;
      if (!target) {
        auto& slot = scratch[blocks.size() % scratch.size()];
        if (slot.size() < std::size_t(n)) slot.resize(std::size_t(kBlock));
        target = slot.data();
      } else {
        target += done;
      }
      blocks.push_back({address + done, n, target});
    }
  };
  for (const auto& s : segments) {
    if (s.address < at) {
      again.push_back(&s);
      continue;
    }
    add(at, s.address - at, nullptr);
    add(s.address, s.bytes, s.out);
    at = s.address + s.bytes;
  }
  add(at, file_bytes - at, nullptr);
  return blocks;
}

}  // namespace

void CheckpointReader::read_batch(const std::vector<ReadRequest>& requests) const {
  // Where each request's bytes lie: per rank file, segments for a plain read; the rest through HDF5.
  std::vector<std::vector<Segment>> by_file(manifest_.files.size());
  struct Hdf5Part {
    const TensorInfo* tensor;
    const PieceLocation* piece;
    std::int64_t lo, hi;
    char* out;
  };
  std::vector<Hdf5Part> through_hdf5;
  for (const auto& r : requests) {
    const TensorInfo& t = at(r.name);
    if (r.offset < 0 || r.count < 0 || r.offset > t.spec.numel() || r.count > t.spec.numel() - r.offset)
      throw UsageError(folder_ + ": range [" + std::to_string(r.offset) + ", +" + std::to_string(r.count) +
                       ") is outside tensor '" + r.name + "' of " + std::to_string(t.spec.numel()) + " elements");
    const std::int64_t esize = std::int64_t(dtype_size(t.spec.dtype));
    auto p = std::upper_bound(t.pieces.begin(), t.pieces.end(), r.offset,
                              [](std::int64_t v, const PieceLocation& q) { return v < q.offset; });
    if (p != t.pieces.begin()) --p;
    for (; p != t.pieces.end() && p->offset < r.offset + r.count; ++p) {
      const std::int64_t lo = std::max(r.offset, p->offset), hi = std::min(r.offset + r.count, p->offset + p->count);
      if (hi <= lo) continue;
      char* out = static_cast<char*>(r.out) + (lo - r.offset) * esize;
      if (p->address >= 0)
        by_file[p->file_index].push_back({p->address + (lo - p->offset) * esize, (hi - lo) * esize, out});
      else
        through_hdf5.push_back({&t, &*p, lo, hi, out});
    }
  }

  // This process's share of the files first: ranks loading one checkpoint pull different files from
  // the disk at once, and find the others' in the page cache afterwards.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < by_file.size(); ++i)
    if (share_.holds(i)) order.push_back(i);
  for (std::size_t i = 0; i < by_file.size(); ++i)
    if (!share_.holds(i)) order.push_back(i);

  std::vector<std::vector<char>> scratch;  // the bytes of a hashed file that no request wants
  for (const std::size_t fi : order) {
    auto& segments = by_file[fi];
    if (segments.empty() && !hash_pending_[fi]) continue;
    std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.address < b.address; });
    const RankFile file((fs::path(folder_) / manifest_.files[fi].name).string());
    if (!hash_pending_[fi]) {
      for (const auto& s : segments) file.read(s.address, s.bytes, s.out);
      continue;
    }
    // The whole file in order, into the requests' buffers where they want the bytes, into scratch
    // between them, hashed block by block while the next blocks are read.
    std::vector<const Segment*> again;
    const std::vector<Block> blocks = whole_file_blocks(segments, manifest_.files[fi].bytes, scratch, again);
    Sha256 hash;
    {
      ReadAhead reads(file, blocks);
      for (std::size_t i = 0; i < blocks.size(); ++i) {
        const Block& b = reads.take(i);
        hash.update(b.into, std::size_t(b.bytes));
      }
    }
    check_file_digest(fi, to_hex(hash.digest()));
    hash_pending_[fi] = 0;
    for (const Segment* s : again) file.read(s->address, s->bytes, s->out);
  }
  for (const auto& part : through_hdf5) read_piece_part(*part.tensor, *part.piece, part.lo, part.hi, part.out);

  for (const auto& r : requests) {
    const TensorInfo& t = at(r.name);
    if (r.offset == 0 && r.count == t.spec.numel()) check_whole(t, r.out);
  }
}

}  // namespace shardtrain::ckpt
