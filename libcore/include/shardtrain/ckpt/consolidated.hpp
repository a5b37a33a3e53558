// A consolidated checkpoint: ONE self-contained HDF5 file holding every logical tensor of a
// training state as a plain dataset (no virtual datasets, no other files), for h5py users and
// archives; and the function that opens any tensor source by path (ckpt-reshard's input).
//
// On disk (format "shardtrain-consolidated", format_version 1):
//   / attributes       format, format_version, step, manifest (JSON string), manifest_sha256
//   /tensors/<tensor>  contiguous dataset of the LOGICAL shape (row-major; a scalar as (1,)),
//                      little-endian; attributes shape (int64[]), dtype, numel, checksum
//                      ("sum64:<16 hex>", the same layout-independent checksum as a checkpoint's)
// The manifest is the source checkpoint's with writers 0, no files, and a history entry recording
// the source and its layout (format.hpp, CheckpointManifest::history).
#pragma once
#include <memory>
#include <string>

#include "shardtrain/ckpt/read.hpp"

namespace shardtrain::ckpt {

inline constexpr const char* kConsolidatedFormat = "shardtrain-consolidated";

// Writes `source` to `path` (through path.tmp, fsync, rename: never a partial file at `path`).
// Every tensor is read whole and its sum64 checked against the source's before it is written
// (IoError naming the tensor otherwise). `path` existing: UsageError (nothing is overwritten).
// Returns the bytes written.
std::int64_t write_consolidated(const TensorSource& source, const std::string& path);

// Reads a consolidated file. Opening checks the format, the manifest against manifest_sha256 and
// every dataset's shape/dtype/numel attributes (IoError naming the file and object otherwise).
// The data of a tensor is verified when read whole (verify_all, or read()).
class ConsolidatedReader final : public TensorSource {
 public:
  explicit ConsolidatedReader(const std::string& path);
  ~ConsolidatedReader() override;
  const std::string& path() const override { return path_; }
  const CheckpointManifest& manifest() const override { return manifest_; }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  void read_range(const std::string& name, std::int64_t offset, std::int64_t count, void* out) const override;
  // Reads the whole tensor and checks its sum64 (IoError naming the file and tensor on mismatch).
  void read(const std::string& name, void* out) const;

 private:
  struct File;
  std::string path_;
  CheckpointManifest manifest_;
  std::vector<TensorInfo> tensors_;
  std::unique_ptr<File> file_;
};

// Opens a tensor source by path:
//   a step_<N> folder (holds index.h5)          -> CheckpointReader(path, options)
//   a checkpoint directory (latest / step_<N>)  -> the checkpoint find_resume_checkpoint picks
//                                                  (the one `latest` names if valid, else the
//                                                  newest valid), opened with `options`
//   a file                                      -> ConsolidatedReader(path)
// Throws IoError / UsageError naming the path when it is none of these or fails validation.
std::unique_ptr<TensorSource> open_tensor_source(const std::string& path, const ReadOptions& options = {});

}  // namespace shardtrain::ckpt
