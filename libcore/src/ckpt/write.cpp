#include "shardtrain/ckpt/write.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <bit>
#include <cerrno>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <ctime>
#include <functional>
#include <thread>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "internal.hpp"
#include "shardtrain/comm/string_collectives.hpp"
#include "shardtrain/ckpt/commit.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"

namespace fs = std::filesystem;

namespace shardtrain::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoint pieces are written as raw little-endian bytes");

using detail::H5Id;

using detail::Block;
using detail::blocks_of_range;

// VDS source names are printf-like ("%b"): a literal '%' must be doubled.
std::string vds_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

struct GatheredPiece {
  std::int64_t offset = 0, count = 0;
  std::uint64_t checksum = 0;
  std::string file;
};

void check_name(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    throw UsageError("checkpoint: tensor name '" + name + "' is empty or contains '/'; names become HDF5 object names");
}

// ---- one rank's file ---------------------------------------------------------------------------------

// A rank file in three parts, so that a process writing several files (a one-process reshard) can
// write file k+1 while file k is flushed and hashed: write_rank_data puts everything into the page
// cache; seal_rank_file (on a helper) makes the file durable and records its SHA-256 and size,
// while sum_rank_pieces adds up the pieces' sum64s from memory beside it.
struct RankOutcome {
  FileRecord file;
  std::string path;
  nlohmann::json pieces = nlohmann::json::array();  // [[tensor, offset, count, checksum], ...]
  double write_s = 0;
};

// Every piece names a listed tensor and lies inside it, with data unless empty.
void check_pieces(int rank, const CheckpointManifest& manifest, const std::map<std::string, const TensorSpec*>& specs,
                  const std::vector<PieceView>& pieces) {
  for (const auto& p : pieces) {
    auto it = specs.find(p.tensor);
    if (it == specs.end())
      throw UsageError("checkpoint step " + std::to_string(manifest.step) + ": rank " + std::to_string(rank) +
                       " has a piece of '" + p.tensor + "', which is not in the tensor list");
    if (p.offset < 0 || p.count < 0 || p.offset + p.count > it->second->numel() || (p.count > 0 && !p.data))
      throw UsageError("checkpoint: piece [" + std::to_string(p.offset) + ", " + std::to_string(p.offset + p.count) +
                       ") of '" + p.tensor + "' is outside its " + std::to_string(it->second->numel()) +
                       " elements (or has no data)");
  }
}

const char* const kRankFileWhatToDo = " (disk full, quota or permission?): free space or fix the folder and save again";

// A piece's bytes and where in the rank file they go.
struct RawWrite {
  std::int64_t file_offset, bytes;
  const void* data;
  std::string name;
};

// The rank file's HDF5 structure (attributes, one dataset per non-empty piece, its space allocated
// and left unwritten): where each piece's bytes go.
std::vector<RawWrite> create_rank_layout(const std::string& path, int rank, int size, const CheckpointManifest& manifest,
                                         const std::map<std::string, const TensorSpec*>& specs,
                                         const std::vector<PieceView>& pieces) {
  const std::string what_to_do = kRankFileWhatToDo;
  std::vector<RawWrite> raw;
  H5Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) throw IoError(path + ": cannot create the checkpoint file" + what_to_do);
  bool ok = detail::write_string_attr(file.get(), "/", "format", std::string(kFormatName) + "-rank") &&
            detail::write_int_attr(file.get(), "/", "format_version", kFormatVersion) &&
            detail::write_int_attr(file.get(), "/", "rank", rank) &&
            detail::write_int_attr(file.get(), "/", "writers", size) &&
            detail::write_int_attr(file.get(), "/", "step", manifest.step);
  if (!ok) throw IoError(path + ": cannot write the file attributes" + what_to_do);
  H5Id pieces_group(H5Gcreate2(file.get(), "/pieces", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!pieces_group.ok()) throw IoError(path + ": cannot create /pieces" + what_to_do);
  H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
  H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  for (const auto& p : pieces) {
    if (p.count == 0) continue;
    const TensorSpec& spec = *specs.at(p.tensor);
    const std::string group = "/pieces/" + p.tensor;
    if (H5Lexists(file.get(), group.c_str(), H5P_DEFAULT) <= 0) {
      H5Id g(H5Gcreate2(file.get(), group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (!g.ok()) throw IoError(path + ": cannot create group " + group + what_to_do);
    }
    const std::string name = detail::piece_dataset_name(p.tensor, p.offset);
    const hsize_t n = hsize_t(p.count);
    H5Id space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    H5Id dset(H5Dcreate2(file.get(), name.c_str(), detail::file_type(spec.dtype), space.get(), H5P_DEFAULT,
                         dcpl.get(), H5P_DEFAULT),
              H5Dclose);
    if (!dset.ok()) throw IoError(path + ": cannot create dataset " + name + what_to_do);
    const haddr_t where = H5Dget_offset(dset.get());
    if (where == HADDR_UNDEF) throw IoError(path + ": no storage allocated for " + name + what_to_do);
    raw.push_back({std::int64_t(where), p.count * std::int64_t(dtype_size(spec.dtype)), p.data, name});
    if (!detail::write_int_attr(dset.get(), ".", "offset", p.offset) ||
        !detail::write_int_attr(dset.get(), ".", "tensor_numel", spec.numel()))
      throw IoError(path + ": cannot write the attributes of " + name + what_to_do);
  }
  pieces_group.reset();
  if (!file.close()) throw IoError(path + ": closing (flushing) the file failed" + what_to_do);
  return raw;
}

// The pieces' bytes with plain pwrite at their places (HDF5 not involved: see create_rank_layout's caller).
void write_raw(const std::string& path, const std::vector<RawWrite>& raw) {
  const std::string what_to_do = kRankFileWhatToDo;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path + ": cannot reopen to write the data (" + std::strerror(errno) + ")");
  for (const auto& r : raw) {
    constexpr std::int64_t kChunk = 64 << 20;
    for (std::int64_t done = 0; done < r.bytes;) {
      const std::size_t len = std::size_t(std::min(kChunk, r.bytes - done));
      const ssize_t n = ::pwrite(fd, static_cast<const char*>(r.data) + done, len, off_t(r.file_offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = n < 0 ? std::strerror(errno) : "short write";
        ::close(fd);
        throw IoError(path + ": writing " + r.name + " (" + std::to_string(r.bytes) + " bytes) failed: " + why +
                      what_to_do);
      }
      done += n;
    }
  }
  if (::close(fd) != 0) throw IoError(path + ": close failed (" + std::string(std::strerror(errno)) + ")" + what_to_do);
}

RankOutcome write_rank_data(const std::string& folder, int rank, int size, const CheckpointManifest& manifest,
                            const std::map<std::string, const TensorSpec*>& specs,
                            const std::vector<PieceView>& pieces) {
  check_pieces(rank, manifest, specs, pieces);
  RankOutcome out;
  out.file.name = rank_file_name(rank);
  out.file.rank = rank;
  out.path = (fs::path(folder) / out.file.name).string();
  const Stopwatch phase_clock;
  // Metadata through HDF5; raw data space allocated now (contiguous, no fill) and written after
  // with plain pwrite: HDF5 (a thread-safe build holds one global lock) is not held during the bulk
  // I/O, so a background save never blocks the data loader's HDF5 reads for long.
  write_raw(out.path, create_rank_layout(out.path, rank, size, manifest, specs, pieces));
  out.write_s = phase_clock.seconds();
  return out;
}

// The pieces' sum64s, from memory (touches only out.pieces: safe beside seal_rank_file).
void sum_rank_pieces(RankOutcome& out, const std::map<std::string, const TensorSpec*>& specs,
                     const std::vector<PieceView>& pieces) {
  for (const auto& p : pieces) {
    if (p.count == 0) continue;
    const TensorSpec& spec = *specs.at(p.tensor);
    out.pieces.push_back({p.tensor, p.offset, p.count, piece_checksum(p.data, p.count, spec.dtype, p.offset)});
  }
}

// fsync on a helper thread while this one hashes the file from the page cache.
void seal_rank_file(RankOutcome& out) {
  std::exception_ptr sync_error;
  std::thread syncer([&] {
    try {
      fsync_path(out.path);
    } catch (...) {
      sync_error = std::current_exception();
    }
  });
  try {
    out.file.sha256 = detail::sha256_file(out.path);
  } catch (...) {
    syncer.join();
    throw;
  }
  syncer.join();
  if (sync_error) std::rethrow_exception(sync_error);
  std::error_code ec;
  out.file.bytes = std::int64_t(fs::file_size(out.path, ec));
  if (ec) throw IoError(out.path + ": cannot stat after writing: " + ec.message());
}

// ---- the index (rank 0) ---------------------------------------------------------------------------------

void write_index(const std::string& path, const CheckpointManifest& manifest, const std::vector<TensorSpec>& tensors,
                 const std::map<std::string, std::vector<GatheredPiece>>& pieces) {
  const std::string what_to_do = " (disk full, quota or permission?): free space and save again";
  H5Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) throw IoError(path + ": cannot create the index" + what_to_do);
  // Each tensor's sum64 is the sum of its pieces' (format.hpp); the manifest records the digest of
  // the table written below.
  std::vector<TensorTableRow> rows;  // in the order of `tensors`
  for (const auto& t : tensors) {
    std::uint64_t sum = 0;
    if (t.numel() > 0)
      for (const auto& p : pieces.at(t.name)) sum += p.checksum;
    rows.push_back({t, sum});
  }
  CheckpointManifest stored = manifest;
  stored.tensor_table_sha256 = tensor_table_sha256(rows);
  const std::string manifest_text = stored.to_json().dump();
  bool ok = detail::write_string_attr(file.get(), "/", "format", kFormatName) &&
            detail::write_int_attr(file.get(), "/", "format_version", kFormatVersion) &&
            detail::write_int_attr(file.get(), "/", "step", manifest.step) &&
            detail::write_int_attr(file.get(), "/", "tokens_seen", manifest.tokens_seen) &&
            detail::write_int_attr(file.get(), "/", "global_batch", manifest.global_batch) &&
            detail::write_int_attr(file.get(), "/", "world_size", manifest.layout.world_size) &&
            detail::write_string_attr(file.get(), "/", "code_version", manifest.code_version) &&
            detail::write_string_attr(file.get(), "/", "created", manifest.created) &&
            detail::write_string_attr(file.get(), "/", "manifest", manifest_text) &&
            detail::write_string_attr(file.get(), "/", "manifest_sha256",
                                      to_hex(sha256(manifest_text.data(), manifest_text.size())));
  if (!ok) throw IoError(path + ": cannot write the manifest attributes" + what_to_do);
  H5Id group(H5Gcreate2(file.get(), "/tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!group.ok()) throw IoError(path + ": cannot create /tensors" + what_to_do);

  for (const auto& [t, sum] : rows) {
    const auto& list = pieces.at(t.name);
    std::vector<hsize_t> shape(t.shape.begin(), t.shape.end());
    if (shape.empty()) shape.push_back(1);  // a scalar is stored as (1,)
    H5Id vspace(H5Screate_simple(int(shape.size()), shape.data(), nullptr), H5Sclose);
    H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (t.dtype == DType::kFloat32) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      H5Pset_fill_value(dcpl.get(), H5T_NATIVE_FLOAT, &nan);
    } else if (t.dtype == DType::kFloat64) {
      const double nan = std::numeric_limits<double>::quiet_NaN();
      H5Pset_fill_value(dcpl.get(), H5T_NATIVE_DOUBLE, &nan);
    }
    if (t.numel() > 0) {
      for (const auto& p : list) {
        const hsize_t src_n = hsize_t(p.count);
        const std::string src_dataset = vds_escape(detail::piece_dataset_name(t.name, p.offset));
        for (const auto& blk : blocks_of_range(shape, p.offset, p.offset + p.count)) {
          H5Id vsel(H5Scopy(vspace.get()), H5Sclose);
          H5Id ssel(H5Screate_simple(1, &src_n, nullptr), H5Sclose);
          const hsize_t src_start = hsize_t(blk.flat_begin - p.offset), src_count = hsize_t(blk.numel);
          if (H5Sselect_hyperslab(vsel.get(), H5S_SELECT_SET, blk.start.data(), nullptr, blk.count.data(), nullptr) < 0 ||
              H5Sselect_hyperslab(ssel.get(), H5S_SELECT_SET, &src_start, nullptr, &src_count, nullptr) < 0 ||
              H5Pset_virtual(dcpl.get(), vsel.get(), p.file.c_str(), src_dataset.c_str(), ssel.get()) < 0)
            throw IoError(path + ": cannot map piece " + std::to_string(p.offset) + " of '" + t.name + "' (HDF5 VDS)");
        }
      }
    }
    const std::string name = "/tensors/" + t.name;
    H5Id dset(H5Dcreate2(file.get(), name.c_str(), detail::file_type(t.dtype), vspace.get(), H5P_DEFAULT, dcpl.get(),
                         H5P_DEFAULT),
              H5Dclose);
    if (!dset.ok()) throw IoError(path + ": cannot create the virtual dataset " + name + what_to_do);
    ok = detail::write_int_array_attr(dset.get(), ".", "shape", t.shape) &&
         detail::write_string_attr(dset.get(), ".", "dtype", dtype_name(t.dtype)) &&
         detail::write_int_attr(dset.get(), ".", "numel", t.numel()) &&
         detail::write_string_attr(dset.get(), ".", "checksum", format_checksum(sum));
    if (!ok) throw IoError(path + ": cannot write the attributes of " + name + what_to_do);
  }
  group.reset();
  if (!file.close()) throw IoError(path + ": closing (flushing) the index failed" + what_to_do);
}

// The processes' reports of the files they wrote, sorted by rank file. Each process reports an
// array of per-file reports (one per file it wrote), or one failure: any failure wins (the first
// one, with its rank), thrown as the error it was.
std::vector<nlohmann::json> file_reports(const std::vector<std::string>& reports) {
  std::vector<nlohmann::json> parsed;
  for (const auto& text : reports) {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_array()) {
      const std::string msg = j.at("error").get<std::string>();
      if (j.at("kind").get<std::string>() == "usage") throw UsageError(msg);
      throw IoError(msg);
    }
    for (const auto& file : j) parsed.push_back(file);
  }
  std::sort(parsed.begin(), parsed.end(),
            [](const auto& a, const auto& b) { return a.at("file").at("rank").template get<int>() < b.at("file").at("rank").template get<int>(); });
  return parsed;
}

// Exact cover of every tensor by the pieces written (each list sorted by offset here).
void check_exact_cover(std::int64_t step, const std::vector<TensorSpec>& tensors,
                       std::map<std::string, std::vector<GatheredPiece>>& pieces) {
  for (const auto& t : tensors) {
    auto& list = pieces[t.name];
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
    std::int64_t next = 0;
    for (const auto& p : list) {
      if (p.offset > next)
        throw UsageError("checkpoint step " + std::to_string(step) + ": elements [" + std::to_string(next) +
                         ", " + std::to_string(p.offset) + ") of tensor '" + t.name +
                         "' are written by no rank; the pieces must cover every tensor exactly once (see spread_pieces)");
      if (p.offset < next)
        throw UsageError("checkpoint step " + std::to_string(step) + ": element " + std::to_string(p.offset) +
                         " of tensor '" + t.name + "' is written twice (again by " + p.file +
                         "); the pieces must cover every tensor exactly once");
      next = p.offset + p.count;
    }
    if (next != t.numel())
      throw UsageError("checkpoint step " + std::to_string(step) + ": elements [" + std::to_string(next) +
                       ", " + std::to_string(t.numel()) + ") of tensor '" + t.name + "' are written by no rank");
  }
}

// End-to-end check of a rewrite: the pieces just written add up to the source's checksums.
void check_expected_checksums(std::int64_t step, const std::map<std::string, std::vector<GatheredPiece>>& pieces,
                              const SaveOptions& options) {
  for (const auto& [name, want] : options.expected_checksums) {
    auto it = pieces.find(name);
    if (it == pieces.end())
      throw UsageError("checkpoint step " + std::to_string(step) + ": expected tensor '" + name +
                       "' is not in the tensor list");
    std::uint64_t got = 0;
    for (const auto& p : it->second) got += p.checksum;
    if (got != want)
      throw IoError("checkpoint step " + std::to_string(step) + ": tensor '" + name + "' as written has " +
                    format_checksum(got) + ", its source has " + format_checksum(want) +
                    " (the source data is corrupt or changed while being read); nothing was committed");
  }
}

// Renames the finished `tmp` folder to `final_dir` and makes the rename durable. An existing
// folder of the same step (e.g. a corrupt one a resume skipped) is moved aside first and removed
// after the new one is in place.
void rename_into_place(const std::string& ckpt_dir, const std::string& tmp, const std::string& final_dir) {
  std::error_code ec;
  const std::string aside = final_dir + ".replaced";
  bool replaced = false;
  if (fs::exists(final_dir, ec)) {
    fs::remove_all(aside, ec);
    fs::rename(final_dir, aside, ec);
    if (ec) throw IoError(final_dir + ": exists and cannot be moved aside (" + ec.message() + ")");
    replaced = true;
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) throw IoError(tmp + ": cannot rename to " + final_dir + " (" + ec.message() + ")");
  fsync_path(ckpt_dir);
  if (replaced) fs::remove_all(aside, ec);
}

// Rank 0: checks the gathered reports, writes the index, commits. Returns total bytes.
std::int64_t commit(const std::string& ckpt_dir, const std::string& tmp, const std::string& final_dir,
                    CheckpointManifest manifest, const std::vector<TensorSpec>& tensors,
                    const std::vector<std::string>& reports, const SaveOptions& options) {
  std::map<std::string, std::vector<GatheredPiece>> pieces;
  for (const auto& t : tensors) pieces[t.name];
  std::int64_t total_bytes = 0;
  manifest.files.clear();
  for (const auto& j : file_reports(reports)) {
    FileRecord f;
    f.name = j.at("file").at("name");
    f.rank = j.at("file").at("rank");
    f.bytes = j.at("file").at("bytes");
    f.sha256 = j.at("file").at("sha256");
    total_bytes += f.bytes;
    for (const auto& p : j.at("pieces"))
      pieces[p.at(0).get<std::string>()].push_back({p.at(1).get<std::int64_t>(), p.at(2).get<std::int64_t>(),
                                                     p.at(3).get<std::uint64_t>(), f.name});
    manifest.files.push_back(f);
  }
  check_exact_cover(manifest.step, tensors, pieces);
  if (options.before_commit) options.before_commit();  // e.g. the source's file hashes: the likelier culprit first
  check_expected_checksums(manifest.step, pieces, options);

  const std::string index = (fs::path(tmp) / kIndexFile).string();
  write_index(index, manifest, tensors, pieces);
  fsync_path(index);
  std::error_code ec;
  total_bytes += std::int64_t(fs::file_size(index, ec));
  fsync_path(tmp);
  rename_into_place(ckpt_dir, tmp, final_dir);
  if (options.update_latest) write_latest(ckpt_dir, fs::path(final_dir).filename().string());
  return total_bytes;
}

// Every tensor by name (and each checked: a valid name, no negative dimension, listed once).
std::map<std::string, const TensorSpec*> specs_by_name(const std::vector<TensorSpec>& tensors) {
  std::map<std::string, const TensorSpec*> specs;
  for (const auto& t : tensors) {
    check_name(t.name);
    for (auto d : t.shape)
      if (d < 0) throw UsageError("checkpoint: tensor '" + t.name + "' has a negative dimension");
    if (!specs.emplace(t.name, &t).second) throw UsageError("checkpoint: tensor '" + t.name + "' is listed twice");
  }
  return specs;
}

// Rank 0: a fresh `tmp` folder for the step (one left by an interrupted save is removed), after
// checking the file system has room for it.
void create_step_folder(const std::string& ckpt_dir, const std::string& tmp, const std::string& folder_name,
                        const std::vector<TensorSpec>& tensors, const SaveOptions& options) {
  std::error_code ec;
  fs::create_directories(ckpt_dir, ec);
  if (ec) throw IoError(ckpt_dir + ": cannot create the checkpoint folder (" + ec.message() + ")");
  if (fs::exists(tmp, ec)) {
    log_line("checkpoint: removing " + tmp + " left by an interrupted save");
    fs::remove_all(tmp, ec);
  }
  if (options.check_free_space) {
    std::int64_t need = 1 << 20;
    for (const auto& t : tensors) need += t.bytes();
    struct statvfs st {};
    if (::statvfs(ckpt_dir.c_str(), &st) == 0) {
      const auto avail = std::int64_t(st.f_bavail) * std::int64_t(st.f_frsize);
      if (avail < need)
        throw IoError(ckpt_dir + ": not enough free space for checkpoint " + folder_name + ": it needs about " +
                      std::to_string(need >> 20) + " MiB, " + std::to_string(avail >> 20) +
                      " MiB are available (disk full?); free space, lower --keep or use another --ckpt-dir");
    }
  }
  if (!fs::create_directory(tmp, ec) || ec)
    throw IoError(tmp + ": cannot create (" + (ec ? ec.message() : std::string("exists")) +
                  "); check permissions and free space of " + ckpt_dir);
}

// This process's rank files r = rank, rank + size, ... written and sealed: the report rank 0's
// commit reads (file_reports), or this rank's failure. Adds to result's write_s, sync_s, bytes_local.
nlohmann::json write_own_files(const std::string& tmp, const CheckpointManifest& manifest,
                               const std::map<std::string, const TensorSpec*>& specs, int writers,
                               const std::function<std::vector<PieceView>(int)>& pieces_of, Communicator& comm,
                               const std::string& local_error, SaveResult& result) {
  const int rank = comm.rank(), size = comm.size();
  nlohmann::json report = nlohmann::json::array();
  try {
    if (!local_error.empty()) throw_encoded(local_error);  // this rank's arguments differ from rank 0's
    // File k is sealed (fsync + SHA-256) on a helper while its pieces are summed and file k+1 is
    // read and written; at most one seal is outstanding. A std::async future waits in its destructor, so an exception here
    // never leaves a seal running on a file being removed.
    std::deque<RankOutcome> outcomes;  // stable addresses for the helper
    std::future<void> sealing;
    auto wait_for_seal = [&] {
      if (!sealing.valid()) return;
      const Stopwatch wait_clock;
      sealing.get();
      result.sync_s += wait_clock.seconds();
    };
    for (int file = rank; file < writers; file += size) {
      const std::vector<PieceView> pieces = pieces_of(file);  // valid until the next pieces_of call
      outcomes.push_back(write_rank_data(tmp, file, writers, manifest, specs, pieces));
      wait_for_seal();
      sealing = std::async(std::launch::async, [&out = outcomes.back()] { seal_rank_file(out); });
      const Stopwatch sum_clock;
      sum_rank_pieces(outcomes.back(), specs, pieces);
      result.write_s += outcomes.back().write_s + sum_clock.seconds();
    }
    wait_for_seal();
    for (const auto& out : outcomes) {
      result.bytes_local += out.file.bytes;
      report.push_back({{"file", {{"name", out.file.name}, {"rank", out.file.rank}, {"bytes", out.file.bytes},
                                  {"sha256", out.file.sha256}}},
                        {"pieces", out.pieces}});
    }
  } catch (const std::exception& e) {
    report = {{"ok", false}, {"kind", dynamic_cast<const UsageError*>(&e) ? "usage" : "io"},
              {"error", "rank " + std::to_string(rank) + ": " + e.what()}};
  }
  return report;
}

void prune_after_commit(const std::string& ckpt_dir, int keep, const std::string& folder_name) {
  try {
    prune_checkpoints(ckpt_dir, keep, folder_name);
  } catch (const std::exception& e) {
    log_line(std::string("checkpoint: pruning failed (the new checkpoint is fine): ") + e.what());
  }
}

void log_committed(const SaveResult& result, int writers) {
  char line[256];
  std::snprintf(line, sizeof line, "checkpoint: committed %s (%.1f MB in %.2f s: %.2f GB/s, %d rank files)",
                result.path.c_str(), double(result.bytes_total) / 1e6, result.total_s,
                double(result.bytes_total) / 1e9 / std::max(result.total_s, 1e-9), writers);
  log_line(line);
}

}  // namespace

SaveResult save_checkpoint(const std::string& ckpt_dir, const CheckpointManifest& manifest,
                           const std::vector<TensorSpec>& tensors, const std::vector<PieceView>& pieces,
                           Communicator& comm, const SaveOptions& options) {
  return save_checkpoint_files(ckpt_dir, manifest, tensors, comm.size(), [&](int) { return pieces; }, comm, options);
}

SaveResult save_checkpoint_files(const std::string& ckpt_dir, const CheckpointManifest& manifest_in,
                                 const std::vector<TensorSpec>& tensors, int writers,
                                 const std::function<std::vector<PieceView>(int)>& pieces_of, Communicator& comm,
                                 const SaveOptions& options) {
  detail::quiet_hdf5();
  const Stopwatch total_clock;
  const int rank = comm.rank();
  if (writers < 1) throw UsageError("checkpoint: " + std::to_string(writers) + " rank files requested; need at least 1");
  SaveResult result;
  result.step = manifest_in.step;

  CheckpointManifest manifest = manifest_in;
  manifest.format_version = kFormatVersion;
  manifest.writers = writers;
  if (manifest.code_version.empty()) manifest.code_version = code_version();

  std::string folder_name, tmp, final_dir;
  std::map<std::string, const TensorSpec*> specs;

  // Phase 1 (rank 0): a fresh step_N.tmp. Argument checks run on every rank (same inputs, same verdict).
  std::string status;
  try {
    folder_name = step_folder_name(manifest.step);
    final_dir = (fs::path(ckpt_dir) / folder_name).string();
    tmp = final_dir + ".tmp";
    specs = specs_by_name(tensors);
    if (rank == 0) create_step_folder(ckpt_dir, tmp, folder_name, tensors, options);
  } catch (const std::exception& e) {
    status = encode_error(e);
  }
  const std::string local_error = status;
  broadcast_string(status, comm);  // rank 0's verdict
  if (!status.empty()) throw_encoded(status);

  // Phase 2 (every rank): its files, rank files r = rank, rank + size, ... (one each when writers == size).
  const nlohmann::json report = write_own_files(tmp, manifest, specs, writers, pieces_of, comm, local_error, result);
  const Stopwatch commit_clock;
  const auto reports = all_gather_strings(report.dump(), comm);  // rank 0 uses them

  // Phase 3 (rank 0): index and commit; then everyone learns the outcome.
  status.clear();
  if (rank == 0) {
    try {
      manifest.created = now_rfc3339();
      result.bytes_total = commit(ckpt_dir, tmp, final_dir, manifest, tensors, reports, options);
      status = "OK:" + std::to_string(result.bytes_total);
    } catch (const std::exception& e) {
      status = encode_error(e);
      std::error_code ec;
      fs::remove_all(tmp, ec);  // free the space; the previous checkpoint stays as it was
    }
  }
  broadcast_string(status, comm);
  if (status.rfind("OK:", 0) != 0) throw_encoded(status);
  result.bytes_total = std::stoll(status.substr(3));
  result.path = final_dir;
  result.commit_s = commit_clock.seconds();
  result.total_s = total_clock.seconds();
  if (rank == 0) {
    // After the outcome is out, so the other ranks do not wait for the deletions.
    if (options.keep > 0) prune_after_commit(ckpt_dir, options.keep, folder_name);
    log_committed(result, writers);
  }
  return result;
}

}  // namespace shardtrain::ckpt
