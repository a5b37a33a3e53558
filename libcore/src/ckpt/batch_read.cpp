// CheckpointReader::read_batch: a whole restore's reads in one sequential pass per rank file, the
// SHA-256 of the share's files computed on the same bytes (ReadOptions::hash_while_reading), so a
// resume reads each byte from disk once instead of hashing every file before reading it again.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

// Bytes handed to the kernel per read (and hashed per step): large enough for the device's
// sequential rate, small enough that the read-ahead of the next block overlaps the hashing of this one.
constexpr std::int64_t kBlock = std::int64_t(32) << 20;

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

  // Exactly `bytes` at `at` into `into`, block by block, each block handed to `consume` once read
  // (the hash); the block after it is announced to the kernel first so the disk works meanwhile.
  template <typename Consume>
  void read(std::int64_t at, std::int64_t bytes, char* into, Consume&& consume) const {
    for (std::int64_t done = 0; done < bytes;) {
      const std::int64_t n = std::min(kBlock, bytes - done);
      ::posix_fadvise(fd_, at + done + n, std::min(kBlock, bytes - done - n), POSIX_FADV_WILLNEED);
      for (std::int64_t got = 0; got < n;) {
        const ssize_t r = ::pread(fd_, into + done + got, std::size_t(n - got), off_t(at + done + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
          throw IoError(path_ + ": reading " + std::to_string(n - got) + " bytes at " + std::to_string(at + done + got) +
                        (r < 0 ? std::string(" failed (") + std::strerror(errno) + ")" : std::string(" hit its end")) +
                        " (truncated or unreadable file); resume from an earlier checkpoint");
        got += r;
      }
      consume(into + done, n);
      done += n;
    }
  }
  void read(std::int64_t at, std::int64_t bytes, char* into) const {
    read(at, bytes, into, [](const char*, std::int64_t) {});
  }

 private:
  std::string path_;
  int fd_ = -1;
};

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

  std::vector<char> scratch;  // the bytes of a hashed file that no request wants
  for (const std::size_t fi : order) {
    auto& segments = by_file[fi];
    if (segments.empty() && !hash_pending_[fi]) continue;
    std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.address < b.address; });
    const RankFile file((fs::path(folder_) / manifest_.files[fi].name).string());
    if (!hash_pending_[fi]) {
      for (const auto& s : segments) file.read(s.address, s.bytes, s.out);
      continue;
    }
    // The whole file in order, into the requests' buffers where they want the bytes (a segment
    // overlapping one already passed is read again afterwards), into scratch between them.
    Sha256 hash;
    const auto hash_block = [&hash](const char* data, std::int64_t n) { hash.update(data, std::size_t(n)); };
    std::vector<const Segment*> again;
    std::int64_t at = 0;
    const auto skip_to = [&](std::int64_t end) {
      while (at < end) {
        const std::int64_t n = std::min(kBlock, end - at);
        scratch.resize(std::size_t(kBlock));
        file.read(at, n, scratch.data(), hash_block);
        at += n;
      }
    };
    for (const auto& s : segments) {
      if (s.address < at) {
        again.push_back(&s);
        continue;
      }
      skip_to(s.address);
      file.read(s.address, s.bytes, s.out, hash_block);
      at = s.address + s.bytes;
    }
    skip_to(manifest_.files[fi].bytes);
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
