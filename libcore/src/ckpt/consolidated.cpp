#include "shardtrain/ckpt/consolidated.hpp"

#include <filesystem>
#include <vector>

#include "internal.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/ckpt/commit.hpp"

namespace fs = std::filesystem;

namespace shardtrain::ckpt {

using detail::H5Id;

namespace {

std::vector<hsize_t> dataset_shape(const TensorSpec& spec) {
  std::vector<hsize_t> shape(spec.shape.begin(), spec.shape.end());
  if (shape.empty()) shape.push_back(1);  // a scalar is stored as (1,), as in the index
  return shape;
}

// Reads tensor `info` of `source` whole into `out` and checks its sum64 against the source's.
void read_verified(const TensorSource& source, const TensorInfo& info, void* out) {
  source.read_range(info.spec.name, 0, info.spec.numel(), out);
  const std::uint64_t got = piece_checksum(out, info.spec.numel(), info.spec.dtype, 0);
  if (got != info.checksum)
    throw IoError(source.path() + ": tensor '" + info.spec.name + "' fails its checksum (" + format_checksum(got) +
                  ", recorded " + format_checksum(info.checksum) + "): its data is corrupt; use another copy");
}

}  // namespace

std::int64_t write_consolidated(const TensorSource& source, const std::string& path) {
  detail::quiet_hdf5();
  std::error_code ec;
  if (fs::exists(path, ec))
    throw UsageError(path + ": exists; ckpt-reshard never overwrites: remove it or choose another --out");
  CheckpointManifest manifest = source.manifest();
  manifest.record_rewrite("consolidate", source.path());
  manifest.writers = 0;
  manifest.files.clear();
  const std::string tmp = path + ".tmp";
  const std::string what_to_do = " (disk full, quota or permission?): free space or choose another --out";
  try {
    H5Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) throw IoError(tmp + ": cannot create" + what_to_do);
    const std::string text = manifest.to_json().dump();
    bool ok = detail::write_string_attr(file.get(), "/", "format", kConsolidatedFormat) &&
              detail::write_int_attr(file.get(), "/", "format_version", kFormatVersion) &&
              detail::write_int_attr(file.get(), "/", "step", manifest.step) &&
              detail::write_string_attr(file.get(), "/", "manifest", text) &&
              detail::write_string_attr(file.get(), "/", "manifest_sha256", to_hex(sha256(text.data(), text.size())));
    if (!ok) throw IoError(tmp + ": cannot write the attributes" + what_to_do);
    H5Id group(H5Gcreate2(file.get(), "/tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!group.ok()) throw IoError(tmp + ": cannot create /tensors" + what_to_do);
    std::vector<char> buffer;
    for (const auto& info : source.tensors()) {
      const TensorSpec& spec = info.spec;
      buffer.resize(std::size_t(spec.bytes()));
      read_verified(source, info, buffer.data());
      const auto shape = dataset_shape(spec);
      H5Id space(H5Screate_simple(int(shape.size()), shape.data(), nullptr), H5Sclose);
      const std::string name = "/tensors/" + spec.name;
      H5Id dset(H5Dcreate2(file.get(), name.c_str(), detail::file_type(spec.dtype), space.get(), H5P_DEFAULT,
                           H5P_DEFAULT, H5P_DEFAULT),
                H5Dclose);
      if (!dset.ok()) throw IoError(tmp + ": cannot create " + name + what_to_do);
      if (spec.numel() > 0 &&
          H5Dwrite(dset.get(), detail::memory_type(spec.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()) < 0)
        throw IoError(tmp + ": writing " + name + " failed" + what_to_do);
      ok = detail::write_int_array_attr(dset.get(), ".", "shape", spec.shape) &&
           detail::write_string_attr(dset.get(), ".", "dtype", dtype_name(spec.dtype)) &&
           detail::write_int_attr(dset.get(), ".", "numel", spec.numel()) &&
           detail::write_string_attr(dset.get(), ".", "checksum", format_checksum(info.checksum));
      if (!ok) throw IoError(tmp + ": cannot write the attributes of " + name + what_to_do);
    }
    group.reset();
    if (!file.close()) throw IoError(tmp + ": closing (flushing) failed" + what_to_do);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  commit_file_atomically(tmp, path);
  return std::int64_t(fs::file_size(path, ec));
}

// ---- reading ---------------------------------------------------------------------------------------

struct ConsolidatedReader::File {
  H5Id file;
};

ConsolidatedReader::ConsolidatedReader(const std::string& path) : path_(path), file_(std::make_unique<File>()) {
  detail::quiet_hdf5();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw IoError(path + ": no such file");
  file_->file = H5Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file_->file.ok()) throw IoError(path + ": not a readable HDF5 file (truncated or corrupt?)");
  const hid_t f = file_->file.get();
  try {
    const std::string format = detail::read_string_attr(f, "/", "format", path);
    if (format != kConsolidatedFormat)
      throw UsageError(path + ": format '" + format + "', not a consolidated shardtrain checkpoint (" +
                       kConsolidatedFormat + ")");
    manifest_ = CheckpointManifest::from_stored_text(detail::read_string_attr(f, "/", "manifest", path),
                                                     detail::read_string_attr(f, "/", "manifest_sha256", path), path);
    for (const auto& name : detail::list_group(f, "/tensors")) {
      const std::string obj = "/tensors/" + name;
      TensorInfo info;
      info.spec.name = name;
      info.spec.shape = detail::read_int_array_attr(f, obj, "shape", path);
      info.spec.dtype = dtype_from_name(detail::read_string_attr(f, obj, "dtype", path));
      info.checksum = parse_checksum(detail::read_string_attr(f, obj, "checksum", path));
      H5Id ds(H5Dopen2(f, obj.c_str(), H5P_DEFAULT), H5Dclose);
      H5Id space(ds.ok() ? H5Dget_space(ds.get()) : H5I_INVALID_HID, H5Sclose);
      const std::int64_t numel = space.ok() ? std::int64_t(H5Sget_simple_extent_npoints(space.get())) : -1;
      if (numel != std::max<std::int64_t>(info.spec.numel(), 1) ||
          detail::read_int_attr(f, obj, "numel", path) != info.spec.numel())
        throw IoError(path + ": " + obj + " has " + std::to_string(numel) + " elements, its shape says " +
                      std::to_string(info.spec.numel()) + " (corrupt file)");
      tensors_.push_back(std::move(info));
    }
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + ": the manifest is not valid JSON (" + e.what() + ")");
  }
  if (tensors_.empty()) throw IoError(path + ": holds no tensors (/tensors is missing or empty)");
}

ConsolidatedReader::~ConsolidatedReader() = default;

void ConsolidatedReader::read_range(const std::string& name, std::int64_t offset, std::int64_t count,
                                    void* out) const {
  const TensorInfo& t = at(name);
  if (offset < 0 || count < 0 || offset + count > t.spec.numel())
    throw UsageError(path_ + ": range [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                     ") is outside tensor '" + name + "' of " + std::to_string(t.spec.numel()) + " elements");
  const std::string obj = "/tensors/" + name;
  H5Id ds(H5Dopen2(file_->file.get(), obj.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw IoError(path_ + ": cannot open " + obj + " (corrupt file)");
  const auto shape = dataset_shape(t.spec);
  const std::int64_t esize = std::int64_t(dtype_size(t.spec.dtype));
  for (const auto& blk : detail::blocks_of_range(shape, offset, offset + count)) {
    H5Id fspace(H5Dget_space(ds.get()), H5Sclose);
    const hsize_t n = hsize_t(blk.numel);
    H5Id mspace(H5Screate_simple(1, &n, nullptr), H5Sclose);
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, blk.start.data(), nullptr, blk.count.data(), nullptr) < 0 ||
        H5Dread(ds.get(), detail::memory_type(t.spec.dtype), mspace.get(), fspace.get(), H5P_DEFAULT,
                static_cast<char*>(out) + (blk.flat_begin - offset) * esize) < 0)
      throw IoError(path_ + ": reading " + obj + " failed (truncated or corrupt file)");
  }
}

void ConsolidatedReader::read(const std::string& name, void* out) const { read_verified(*this, at(name), out); }

std::unique_ptr<TensorSource> open_tensor_source(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError(path + ": no such checkpoint folder or file");
  if (!fs::is_directory(path, ec)) return std::make_unique<ConsolidatedReader>(path);
  if (fs::exists(fs::path(path) / kIndexFile, ec)) return std::make_unique<CheckpointReader>(path, options);
  if (!fs::exists(fs::path(path) / kLatestFile, ec) && list_checkpoints(path).empty())
    throw UsageError(path + ": neither a checkpoint (no index.h5) nor a checkpoint directory (no latest, no "
                     "step_<N> folders); pass a step_<N> folder, a --ckpt-dir or a consolidated file");
  const auto chosen = find_resume_checkpoint(path, options);
  if (!chosen)
    throw IoError(path + ": holds no valid checkpoint (every step_<N> folder fails validation; see above)");
  return std::make_unique<CheckpointReader>(*chosen, options);
}

}  // namespace shardtrain::ckpt
