// Reading and validating checkpoints. A checkpoint is trusted only after validation:
//   1. <folder>/index.h5 exists and opens; its `manifest` attribute matches `manifest_sha256`,
//      parses, and has every field (CheckpointManifest::from_json);
//   2. every rank file of manifest.files exists with the recorded size (a truncated file names
//      itself) and, with verify_files, the recorded SHA-256 (a flipped byte names the file);
//   3. the model config equals the expected one (ReadOptions::expected_model) and the caller's
//      predicate, if any, accepts the manifest;
//   4. every tensor of /tensors is covered exactly once by the pieces in the rank files, each
//      piece a 1-D run of the tensor's type named by its offset; the index's shape and dtype
//      attributes agree with the tensor's dataset;
//   5. the index's tensor table (names, types, shapes, sum64s) has the manifest's
//      tensor_table_sha256 (the index is the one file no file hash covers: this ties it to the
//      manifest); in a checkpoint written before that digest, with verify_files, every tensor's
//      pieces add up to the index's sum64 instead (tying the table to the verified rank files).
// Reading a whole tensor also checks its sum64 checksum (format.hpp).
// Every failure throws IoError (missing/unreadable/truncated/corrupt file) or UsageError (an
// incompatible checkpoint: another model config, another format version), naming the file.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/ckpt/format.hpp"

namespace shardtrain::ckpt {

struct ReadOptions {
  // Re-hash every rank file with SHA-256 at open (about 1.5 GB/s plus the read) and add up every
  // tensor's sum64 against the index (a second read, from the page cache). Turn off on ranks that
  // open a checkpoint the ranks just validated (find_resume_checkpoint_collective).
  bool verify_files = true;
  // With verify_files, the part of that verification this process does when `count` processes
  // validate one checkpoint together (find_resume_checkpoint_collective): it hashes the rank files
  // i of the manifest with i % count == index and adds up only the pieces those files hold; step 5
  // is then the caller's (CheckpointReader::share_piece_sums, check_piece_sums). {0, 1}: all of it
  // here, step 5 included.
  struct Share {
    int index = 0, count = 1;
    bool holds(std::size_t file_index) const { return int(file_index % std::size_t(count)) == index; }
  } share;
  // With verify_files, on a checkpoint whose manifest has tensor_table_sha256: the share's rank files
  // are not hashed at open but while read_batch reads them (each read whole, once, its bytes hashed
  // as they land in the caller's buffers or a scratch block), and by verify_pending_files() for any
  // no read touched. Until verify_pending_files() returns, the checkpoint is NOT validated and what
  // was read may be corrupt: only for a caller that can discard it (restore_resume_checkpoint_collective).
  // Ignored for older checkpoints (their piece sums need the hashed files first).
  bool hash_while_reading = false;
  // When set, manifest.model must equal it (JSON equality); the error lists the differing keys.
  std::optional<nlohmann::json> expected_model;
  // When set, called with the manifest; a non-empty return is the reason to refuse it (UsageError).
  std::function<std::string(const CheckpointManifest&)> compatible;
};

// Where one piece of a logical tensor lives.
struct PieceLocation {
  std::string file;          // rank file name, relative to the folder
  std::string dataset;       // "/pieces/<tensor>/<offset>"
  std::int64_t offset = 0;   // element offset in the flattened tensor
  std::int64_t count = 0;
  std::size_t file_index = 0;  // its rank file's position in manifest.files
  // Byte offset of its elements in the rank file when a plain read of count * dtype size bytes
  // there gives them (contiguous, unfiltered, the memory type's byte order: what the writer makes);
  // -1 otherwise, when they are read through HDF5.
  std::int64_t address = -1;
};

// One destination of CheckpointReader::read_batch: elements [offset, offset+count) of the
// flattened tensor `name` into `out` (count * dtype size bytes).
struct ReadRequest {
  std::string name;
  std::int64_t offset = 0, count = 0;
  void* out = nullptr;
};

struct TensorInfo {
  TensorSpec spec;
  std::uint64_t checksum = 0;         // sum64 over the logical tensor
  std::vector<PieceLocation> pieces;  // sorted by offset, covering [0, numel) exactly
};

// Anything that holds the logical tensors of a training state and its manifest: a checkpoint
// folder (CheckpointReader) or a consolidated file (consolidated.hpp). What ckpt-reshard reads.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const std::string& path() const = 0;
  virtual const CheckpointManifest& manifest() const = 0;
  // Every logical tensor, sorted by name, with its sum64 (pieces: where a checkpoint keeps them,
  // empty for a consolidated file).
  virtual const std::vector<TensorInfo>& tensors() const = 0;
  // Elements [offset, offset+count) of the flattened tensor into `out` (no checksum: partial).
  virtual void read_range(const std::string& name, std::int64_t offset, std::int64_t count, void* out) const = 0;
  const TensorInfo* find(const std::string& name) const;
  // Throws UsageError "<path>: no tensor '<name>' in the checkpoint".
  const TensorInfo& at(const std::string& name) const;
};

class CheckpointReader final : public TensorSource {
 public:
  // Opens and validates `folder` (a step_<N> folder). Throws as described above.
  explicit CheckpointReader(const std::string& folder, const ReadOptions& options = {});
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& folder() const { return folder_; }
  const std::string& path() const override { return folder_; }
  const CheckpointManifest& manifest() const override { return manifest_; }
  // The index's manifest_sha256 attribute, verified against the manifest text when opened: the
  // checkpoint's identity (release records).
  const std::string& manifest_sha256() const { return manifest_sha256_; }
  // Every logical tensor, sorted by name.
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  // Throws UsageError "<folder>: no tensor '<name>' in the checkpoint".
  const TensorInfo& at(const std::string& name) const;

  // Reads the whole tensor into `out` (numel * dtype size bytes) and verifies its checksum
  // (IoError naming the tensor and the rank files holding it on a mismatch).
  void read(const std::string& name, void* out) const;
  // Reads elements [offset, offset+count) of the flattened tensor (no checksum: partial).
  void read_range(const std::string& name, std::int64_t offset, std::int64_t count, void* out) const override;
  // Every request at once, each rank file read in one sequential pass (the files of this process's
  // share first: ranks loading the same checkpoint read different files from disk at the same time,
  // then each other's from the page cache). A request covering a whole tensor has its checksum
  // verified (as read()); a partial one not (as read_range()). With hash_while_reading, the pass over
  // a share file still pending reads it whole and checks its SHA-256 (IoError naming the file: the
  // requests' buffers then hold unverified bytes). Requests may overlap; out buffers must not.
  void read_batch(const std::vector<ReadRequest>& requests) const;
  // With hash_while_reading: hashes the share's rank files read_batch has not read whole and checks
  // every one; throws the IoError of the first corrupt file. After it returns, the checkpoint is
  // validated as a constructor with verify_files validates it. No-op otherwise.
  void verify_pending_files() const;
  // float32 conveniences (UsageError if the tensor is not float32).
  std::vector<float> read_floats(const std::string& name) const;
  std::vector<float> read_floats(const std::string& name, std::int64_t offset, std::int64_t count) const;

  // Opened with a share of the verification (ReadOptions::share, count > 1): per tensor (the order of
  // tensors()), the sum64 terms of the pieces in this share's rank files. The shares' vectors added
  // element by element (mod 2^64) are the tensors' whole sums; empty for a reader opened otherwise.
  const std::vector<std::uint64_t>& share_piece_sums() const { return share_sums_; }
  // True when the caller owes step 5 (check_piece_sums with every share's sums): opened with a
  // share of the verification, of a checkpoint whose manifest has no tensor_table_sha256.
  bool piece_sums_owed() const { return piece_sums_owed_; }
  // Step 5 with every share's sums added up (`totals`, the order of tensors()): throws the IoError
  // of a corrupt index for the first tensor whose total differs from its sum64 in the index.
  void check_piece_sums(const std::vector<std::uint64_t>& totals) const;

 private:
  // The sum64 terms of the pieces in the rank files `in_share` accepts, per tensor (step 5's data).
  std::vector<std::uint64_t> piece_sums(const std::function<bool(const std::string& file)>& in_share) const;
  struct OpenFiles;
  std::string folder_;
  CheckpointManifest manifest_;
  std::string manifest_sha256_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::uint64_t> share_sums_;
  bool piece_sums_owed_ = false;
  ReadOptions::Share share_;
  // Per manifest file: its SHA-256 still to be checked by read_batch or verify_pending_files
  // (hash_while_reading). Mutable: reading does the validation's hashing on the way.
  mutable std::vector<char> hash_pending_;
  // Throws the IoError of rank file `file_index` when `sha256_hex` is not the manifest's digest of it.
  void check_file_digest(std::size_t file_index, const std::string& sha256_hex) const;
  // Elements [lo, hi) of the tensor (inside piece p) through HDF5, into `out`.
  void read_piece_part(const TensorInfo& t, const PieceLocation& p, std::int64_t lo, std::int64_t hi, void* out) const;
  // The checksum check of read(): `data` holds the whole tensor.
  void check_whole(const TensorInfo& t, const void* data) const;
  std::map<std::string, std::size_t> by_name_;
  std::unique_ptr<OpenFiles> files_;
};

// Step 2 of the validation for every file, not only up to the first bad one: for each rank file of
// `manifest` (in `folder`), "OK" or what is wrong with it ("missing", "<n> bytes, the manifest
// records <m>", "SHA-256 <hex>... differs from the manifest's <hex>..."). Same order as
// manifest.files. For --inspect (every bad file named) and ckpt-reshard (hashing the source while
// the target is written).
std::vector<std::string> check_rank_files(const std::string& folder, const CheckpointManifest& manifest);

// Runs the validation of CheckpointReader; returns the error message, or "" when valid.
std::string validate_checkpoint(const std::string& folder, const ReadOptions& options = {});

}  // namespace shardtrain::ckpt
