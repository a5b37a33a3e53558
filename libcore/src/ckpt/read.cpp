#include "shardtrain/ckpt/read.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "internal.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/error.hpp"

namespace fs = std::filesystem;

namespace shardtrain::ckpt {

using detail::H5Id;

struct CheckpointReader::OpenFiles {
  std::map<std::string, H5Id> files;  // rank file name -> open handle
  std::string folder;
  hid_t get(const std::string& name) {
    auto it = files.find(name);
    if (it != files.end()) return it->second.get();
    const std::string path = (fs::path(folder) / name).string();
    H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!f.ok()) throw IoError(path + ": not a readable HDF5 file (truncated or corrupt?); resume from an earlier checkpoint");
    const hid_t id = f.get();
    files.emplace(name, std::move(f));
    return id;
  }
};

namespace {

// "n_layer: 4 (checkpoint) vs 2 (expected)" for each differing key of two JSON objects.
std::string describe_difference(const nlohmann::json& have, const nlohmann::json& want) {
  std::ostringstream out;
  int shown = 0;
  auto add = [&](const std::string& key, const std::string& a, const std::string& b) {
    if (shown++) out << ", ";
    out << key << ": " << a << " (checkpoint) vs " << b << " (this run)";
  };
  if (have.is_object() && want.is_object()) {
    for (auto it = want.begin(); it != want.end(); ++it)
      if (!have.contains(it.key()))
        add(it.key(), "absent", it.value().dump());
      else if (have.at(it.key()) != it.value())
        add(it.key(), have.at(it.key()).dump(), it.value().dump());
    for (auto it = have.begin(); it != have.end(); ++it)
      if (!want.contains(it.key())) add(it.key(), it.value().dump(), "absent");
  } else {
    add("model", have.dump(), want.dump());
  }
  return out.str();
}

// The number of elements of `shape`; nullopt for a negative dimension or a product past 2^63 - 1.
std::optional<std::int64_t> checked_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

template <typename T>
std::string list_text(const std::vector<T>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

// Whether elements stored as HDF5 type `type` read back exactly as `dtype`: the same class, size
// and signedness (any byte order: HDF5 converts that exactly). Anything else HDF5 would convert by
// rounding or clamping, silently, or not at all.
bool stores_exactly(hid_t type, DType dtype) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  if (size != dtype_size(dtype)) return false;
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64: return cls == H5T_FLOAT;
    case DType::kInt32:
    case DType::kInt64: return cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_2;
    case DType::kUInt64:
    case DType::kUInt8: return cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_NONE;
  }
  return false;
}

// "4-byte floats", "8-byte signed integers", "strings", ...: what a dataset stores, for messages.
std::string stored_type_text(hid_t type) {
  const std::string size = std::to_string(H5Tget_size(type)) + "-byte ";
  switch (H5Tget_class(type)) {
    case H5T_FLOAT: return size + "floats";
    case H5T_INTEGER: return size + (H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned" : "signed") + " integers";
    case H5T_STRING: return "strings";
    default: return "values of another kind (HDF5 type class " + std::to_string(int(H5Tget_class(type))) + ")";
  }
}

// The extent of a dataspace (empty for a scalar or null one, or when unreadable).
// Where a piece's bytes lie in its rank file when a plain read there returns them as they are in
// memory (PieceLocation::address): contiguous storage, allocated, no filter, no external file, the
// memory type itself (so the byte order too), inside the file's `file_bytes`. -1 otherwise.
std::int64_t plain_read_address(hid_t dataset, DType dtype, hsize_t stored_bytes, std::int64_t file_bytes) {
  H5Id dcpl(H5Dget_create_plist(dataset), H5Pclose);
  H5Id type(H5Dget_type(dataset), H5Tclose);
  if (!dcpl.ok() || !type.ok() || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(dcpl.get()) != 0 ||
      H5Pget_external_count(dcpl.get()) != 0 || H5Tequal(type.get(), detail::memory_type(dtype)) <= 0)
    return -1;
  const haddr_t at = H5Dget_offset(dataset);
  if (at == HADDR_UNDEF || at > haddr_t(file_bytes) || stored_bytes > hsize_t(file_bytes) - at) return -1;
  return std::int64_t(at);
}

std::vector<hsize_t> extent_of(hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::size_t(rank > 0 ? rank : 0));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return dims;
}

// The index file of the checkpoint `folder`: the folder must exist and hold one (it is written last).
std::string committed_index_of(const std::string& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw IoError(folder + ": no such checkpoint folder");
  const std::string index = (fs::path(folder) / kIndexFile).string();
  if (!fs::exists(index, ec))
    throw IoError(index + ": missing, so " + folder +
                  " is not a committed checkpoint (incomplete copy or interrupted save); use an earlier one");
  return index;
}

// The manifest stored in the index, checked against its SHA-256 (into `sha256`).
CheckpointManifest read_manifest(hid_t idx, const std::string& index, std::string& sha256) {
  std::string text;
  try {
    text = detail::read_string_attr(idx, "/", "manifest", index);
    sha256 = detail::read_string_attr(idx, "/", "manifest_sha256", index);
  } catch (const UsageError& e) {
    throw IoError(std::string(e.what()) + " (corrupt or foreign index)");
  }
  return CheckpointManifest::from_stored_text(text, sha256, index);
}

// A rank file the manifest lists: present, and of the size it records.
void check_rank_file_size(const std::string& path, const FileRecord& f) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw IoError(path + ": missing rank file (the checkpoint is incomplete); resume from an earlier checkpoint");
  const auto size = std::int64_t(fs::file_size(path, ec));
  if (ec) throw IoError(path + ": cannot stat (" + ec.message() + ")");
  if (size != f.bytes)
    throw IoError(path + ": " + std::to_string(size) + " bytes, the manifest records " + std::to_string(f.bytes) +
                  " (truncated or overwritten); resume from an earlier checkpoint");
}

// The caller's model and its other conditions (ReadOptions::expected_model, compatible).
void check_compatible(const std::string& index, const CheckpointManifest& manifest, const ReadOptions& options) {
  if (options.expected_model && manifest.model != *options.expected_model)
    throw UsageError(index + ": checkpoint of another model config: " +
                     describe_difference(manifest.model, *options.expected_model) +
                     "; resume with the checkpoint's model config or start a new --ckpt-dir");
  if (options.compatible) {
    const std::string why = options.compatible(manifest);
    if (!why.empty()) throw UsageError(index + ": " + why);
  }
}

// The index's tensor table against the manifest's digest of it.
void check_tensor_table(const std::string& index, const std::vector<TensorInfo>& tensors,
                        const CheckpointManifest& manifest) {
  std::vector<TensorTableRow> rows;
  rows.reserve(tensors.size());
  for (const auto& t : tensors) rows.push_back({t.spec, t.checksum});
  if (tensor_table_sha256(std::move(rows)) != manifest.tensor_table_sha256)
    throw IoError(index + ": its tensor table (the names, types, shapes and checksums of " +
                  std::to_string(tensors.size()) +
                  " tensors) does not match the manifest's tensor_table_sha256 (corrupt index); resume from an "
                  "earlier checkpoint");
}

// One tensor of the index, its shape and type read from every place the index records them and
// required to agree.
TensorInfo read_tensor_entry(hid_t idx, const std::string& index, const std::string& name) {
  const std::string obj = "/tensors/" + name;
  const std::string where = index + ": " + obj;
  TensorInfo info;
  info.spec.name = name;
  std::string dtype, checksum;
  std::int64_t numel = 0;
  try {
    info.spec.shape = detail::read_int_array_attr(idx, obj, "shape", index);
    dtype = detail::read_string_attr(idx, obj, "dtype", index);
    checksum = detail::read_string_attr(idx, obj, "checksum", index);
    numel = detail::read_int_attr(idx, obj, "numel", index);
  } catch (const UsageError& e) {
    throw IoError(std::string(e.what()) + " (corrupt index)");
  }
  try {
    info.spec.dtype = dtype_from_name(dtype);
    info.checksum = parse_checksum(checksum);
  } catch (const UsageError& e) {
    throw IoError(where + ": " + e.what() + " (corrupt index)");
  }
  const std::optional<std::int64_t> shape_numel = checked_numel(info.spec.shape);
  if (!shape_numel)
    throw IoError(where + ": shape " + list_text(info.spec.shape) +
                  " has a negative dimension or more than 2^63 elements (corrupt index)");
  if (numel != *shape_numel) throw IoError(where + " numel disagrees with its shape (corrupt index)");
  H5Id ds(H5Dopen2(idx, obj.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw IoError(where + ": not a readable dataset (corrupt index)");
  H5Id space(H5Dget_space(ds.get()), H5Sclose);
  std::vector<hsize_t> extent(info.spec.shape.begin(), info.spec.shape.end());
  if (extent.empty()) extent.push_back(1);  // a scalar is stored as (1,)
  if (!space.ok() || H5Sget_simple_extent_type(space.get()) != H5S_SIMPLE || extent_of(space.get()) != extent)
    throw IoError(where + ": its shape attribute " + list_text(info.spec.shape) + " disagrees with its dataset's extent " +
                  list_text(space.ok() ? extent_of(space.get()) : std::vector<hsize_t>{}) + " (corrupt index)");
  H5Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || !stores_exactly(type.get(), info.spec.dtype))
    throw IoError(where + ": its dtype attribute says " + dtype + ", its dataset stores " +
                  (type.ok() ? stored_type_text(type.get()) : std::string("an unreadable type")) + " (corrupt index)");
  return info;
}

// One piece of `tensor` in rank file `f` (the `fi`-th; open as `h`, at `path`), checked against
// the tensor's entry in the index. Each piece's dataset is named by its offset and carries it again
// as an attribute, with the tensor's element count; it must be a 1-D run of the tensor's type whose
// bytes are all stored (the writer allocates them whole), inside the tensor. So the cover check
// cannot overflow, and a tensor's elements are bounded by the bytes really in the rank files.
PieceLocation read_piece(hid_t h, const std::string& path, const FileRecord& f, std::size_t fi,
                         const std::string& tensor, const std::string& piece, const TensorSpec& spec,
                         const std::string& index) {
  const std::int64_t esize = std::int64_t(dtype_size(spec.dtype));
  const std::string dname = "/pieces/" + tensor + "/" + piece;
  const std::string where = path + ": " + dname;
  H5Id ds(H5Dopen2(h, dname.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw IoError(path + ": cannot open " + dname + " (corrupt file)");
  H5Id space(H5Dget_space(ds.get()), H5Sclose);
  PieceLocation loc;
  loc.file = f.name;
  loc.file_index = fi;
  loc.dataset = dname;
  std::int64_t tensor_numel = 0;
  try {
    loc.offset = detail::read_int_attr(ds.get(), ".", "offset", path);
    tensor_numel = detail::read_int_attr(ds.get(), ".", "tensor_numel", path);
  } catch (const UsageError& e) {
    throw IoError(std::string(e.what()) + " (" + dname + ", corrupt file)");
  }
  if (!space.ok() || H5Sget_simple_extent_type(space.get()) != H5S_SIMPLE || H5Sget_simple_extent_ndims(space.get()) != 1)
    throw IoError(where + ": not a 1-D run of elements (corrupt file)");
  loc.count = H5Sget_simple_extent_npoints(space.get());
  if (loc.count < 1 || loc.count > std::numeric_limits<std::int64_t>::max() / esize)
    throw IoError(where + ": " + std::to_string(loc.count) + " elements (corrupt file)");
  H5Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || !stores_exactly(type.get(), spec.dtype))
    throw IoError(where + ": stores " + (type.ok() ? stored_type_text(type.get()) : std::string("an unreadable type")) +
                  ", the index says '" + tensor + "' is " + dtype_name(spec.dtype) + " (corrupt file)");
  if (dname != detail::piece_dataset_name(tensor, loc.offset))
    throw IoError(where + ": its offset attribute " + std::to_string(loc.offset) +
                  " disagrees with its name (corrupt file)");
  if (tensor_numel != spec.numel())
    throw IoError(where + ": a piece of a " + std::to_string(tensor_numel) + "-element '" + tensor + "', " + index +
                  " says " + std::to_string(spec.numel()) + " elements (mixed-up folder?)");
  if (loc.offset < 0 || loc.offset > spec.numel() || loc.count > spec.numel() - loc.offset)
    throw IoError(where + ": elements [" + std::to_string(loc.offset) + ", +" + std::to_string(loc.count) +
                  ") lie outside the tensor's " + std::to_string(spec.numel()) + " (corrupt file)");
  const hsize_t stored = H5Dget_storage_size(ds.get());
  if (stored != hsize_t(loc.count * esize))
    throw IoError(where + ": " + std::to_string(stored) + " bytes stored for its " + std::to_string(loc.count) +
                  " elements of " + std::to_string(esize) + " bytes (corrupt file)");
  loc.address = plain_read_address(ds.get(), spec.dtype, stored, f.bytes);
  return loc;
}

// Every tensor's pieces, sorted by offset, must cover it exactly: no gap, no overlap, no element
// in no rank file.
void check_cover(const std::string& folder, std::vector<TensorInfo>& tensors) {
  for (auto& t : tensors) {
    std::sort(t.pieces.begin(), t.pieces.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
    std::int64_t next = 0;
    for (const auto& p : t.pieces) {
      if (p.offset != next)
        throw IoError(folder + ": tensor '" + t.spec.name + "' has " + (p.offset > next ? "a gap" : "overlapping pieces") +
                      " at element " + std::to_string(std::min(next, p.offset)) + " in its rank files (" + p.file +
                      "); the checkpoint is inconsistent: resume from an earlier one");
      next = p.offset + p.count;
    }
    if (next != t.spec.numel())
      throw IoError(folder + ": tensor '" + t.spec.name + "' has elements [" + std::to_string(next) + ", " +
                    std::to_string(t.spec.numel()) + ") in no rank file; the checkpoint is incomplete");
  }
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& folder_in, const ReadOptions& options)
    : files_(std::make_unique<OpenFiles>()) {
  detail::quiet_hdf5();
  folder_ = folder_in;
  while (folder_.size() > 1 && folder_.back() == '/') folder_.pop_back();
  files_->folder = folder_;
  const std::string index = committed_index_of(folder_);

  // 1. Manifest.
  H5Id idx(H5Fopen(index.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!idx.ok()) throw IoError(index + ": not a readable HDF5 file (truncated or corrupt?); use an earlier checkpoint");
  manifest_ = read_manifest(idx.get(), index, manifest_sha256_);

  // 2. Files: present, sizes, checksums (of this process's share when several validate together;
  // left to the reads when hashed while reading).
  std::set<std::string> share_files;
  share_ = options.share;
  hash_pending_.assign(manifest_.files.size(), 0);
  const bool defer_hashing = options.hash_while_reading && !manifest_.tensor_table_sha256.empty();
  for (std::size_t i = 0; i < manifest_.files.size(); ++i) {
    const auto& f = manifest_.files[i];
    const std::string path = (fs::path(folder_) / f.name).string();
    check_rank_file_size(path, f);
    if (options.verify_files && options.share.holds(i)) {
      share_files.insert(f.name);
      if (defer_hashing)
        hash_pending_[i] = 1;
      else
        check_file_digest(i, detail::sha256_file(path));
    }
  }

  // 3. Compatibility.
  check_compatible(index, manifest_, options);

  // 4. Tensors and their pieces. The index records each tensor's shape twice (the shape attribute and
  // its dataset's extent) and its type three times (the dtype attribute, its dataset's type and the
  // pieces' type): a disagreement is corruption, never a value read as another shape or type.
  for (const auto& name : detail::list_group(idx.get(), "/tensors")) {
    TensorInfo info = read_tensor_entry(idx.get(), index, name);
    by_name_[name] = tensors_.size();
    tensors_.push_back(std::move(info));
  }
  // Then every piece of every rank file (read_piece), and their cover of each tensor (check_cover).
  for (std::size_t fi = 0; fi < manifest_.files.size(); ++fi) {
    const auto& f = manifest_.files[fi];
    const std::string path = (fs::path(folder_) / f.name).string();
    const hid_t h = files_->get(f.name);
    for (const auto& tensor : detail::list_group(h, "/pieces")) {
      auto it = by_name_.find(tensor);
      if (it == by_name_.end())
        throw IoError(path + ": holds pieces of '" + tensor + "', which " + index +
                      " does not list (mixed-up folder, or a corrupt index?)");
      const TensorSpec& spec = tensors_[it->second].spec;
      for (const auto& piece : detail::list_group(h, "/pieces/" + tensor))
        tensors_[it->second].pieces.push_back(read_piece(h, path, f, fi, tensor, piece, spec, index));
    }
  }
  check_cover(folder_, tensors_);

  // 5. The index (the one file no file hash covers) against the manifest: its tensor table against
  // the manifest's digest of it; in a checkpoint written before the digest, with verify_files, every
  // tensor's pieces (their files' SHA-256 verified) must add up to the index's sum64 (with a share,
  // the other shares' sums are the caller's to add: check_piece_sums). Refused here, where a resume
  // can still fall back, rather than at the first read.
  if (!manifest_.tensor_table_sha256.empty()) {
    check_tensor_table(index, tensors_, manifest_);
    return;
  }
  if (!options.verify_files) return;
  if (options.share.count > 1) {
    piece_sums_owed_ = true;
    share_sums_ = piece_sums([&](const std::string& file) { return share_files.count(file) > 0; });
  } else {
    check_piece_sums(piece_sums([](const std::string&) { return true; }));
  }
}

std::vector<std::uint64_t> CheckpointReader::piece_sums(
    const std::function<bool(const std::string& file)>& in_share) const {
  constexpr std::int64_t kChunk = 1 << 20;  // elements read at a time: bounded memory for any tensor
  std::vector<unsigned char> buffer;
  std::vector<std::uint64_t> sums;
  sums.reserve(tensors_.size());
  for (const auto& t : tensors_) {
    const std::int64_t esize = std::int64_t(dtype_size(t.spec.dtype));
    buffer.resize(std::size_t(std::min(kChunk, std::max<std::int64_t>(t.spec.numel(), 1)) * esize));
    std::uint64_t sum = 0;
    for (const auto& p : t.pieces) {
      if (!in_share(p.file)) continue;
      for (std::int64_t at = p.offset; at < p.offset + p.count; at += kChunk) {
        const std::int64_t n = std::min(kChunk, p.offset + p.count - at);
        read_range(t.spec.name, at, n, buffer.data());
        sum += piece_checksum(buffer.data(), n, t.spec.dtype, at);
      }
    }
    sums.push_back(sum);
  }
  return sums;
}

void CheckpointReader::check_piece_sums(const std::vector<std::uint64_t>& totals) const {
  const std::string index = (fs::path(folder_) / kIndexFile).string();
  if (totals.size() != tensors_.size())
    throw IoError(index + ": " + std::to_string(totals.size()) + " piece sums for " +
                  std::to_string(tensors_.size()) + " tensors (the validating ranks read different indexes)");
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const TensorInfo& t = tensors_[i];
    if (totals[i] != t.checksum)
      throw IoError(index + ": /tensors/" + t.spec.name + " records checksum " + format_checksum(t.checksum) +
                    ", the pieces its rank files hold (their SHA-256 verified) add up to " +
                    format_checksum(totals[i]) + " (corrupt index); resume from an earlier checkpoint");
  }
}

const TensorInfo* TensorSource::find(const std::string& name) const {
  const auto& list = tensors();
  auto it = std::lower_bound(list.begin(), list.end(), name,
                             [](const TensorInfo& t, const std::string& n) { return t.spec.name < n; });
  return it != list.end() && it->spec.name == name ? &*it : nullptr;
}

const TensorInfo& TensorSource::at(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) throw UsageError(path() + ": no tensor '" + name + "' in the checkpoint");
  return *t;
}

CheckpointReader::~CheckpointReader() = default;

const TensorInfo* CheckpointReader::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& CheckpointReader::at(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) throw UsageError(folder_ + ": no tensor '" + name + "' in the checkpoint");
  return *t;
}

void CheckpointReader::read_range(const std::string& name, std::int64_t offset, std::int64_t count, void* out) const {
  const TensorInfo& t = at(name);
  if (offset < 0 || count < 0 || offset + count > t.spec.numel())
    throw UsageError(folder_ + ": range [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                     ") is outside tensor '" + name + "' of " + std::to_string(t.spec.numel()) + " elements");
  const std::int64_t esize = std::int64_t(dtype_size(t.spec.dtype));
  auto first = std::upper_bound(t.pieces.begin(), t.pieces.end(), offset,
                                [](std::int64_t v, const PieceLocation& p) { return v < p.offset; });
  if (first != t.pieces.begin()) --first;
  for (auto p = first; p != t.pieces.end() && p->offset < offset + count; ++p) {
    const std::int64_t lo = std::max(offset, p->offset), hi = std::min(offset + count, p->offset + p->count);
    if (hi <= lo) continue;
    read_piece_part(t, *p, lo, hi, static_cast<char*>(out) + (lo - offset) * esize);
  }
}

void CheckpointReader::read_piece_part(const TensorInfo& t, const PieceLocation& p, std::int64_t lo, std::int64_t hi,
                                       void* out) const {
  const std::string path = (fs::path(folder_) / p.file).string();
  const hid_t h = files_->get(p.file);
  H5Id ds(H5Dopen2(h, p.dataset.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw IoError(path + ": cannot open " + p.dataset + " (corrupt file)");
  H5Id fspace(H5Dget_space(ds.get()), H5Sclose);
  const hsize_t start = hsize_t(lo - p.offset), n = hsize_t(hi - lo);
  H5Id mspace(H5Screate_simple(1, &n, nullptr), H5Sclose);
  if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr) < 0 ||
      H5Dread(ds.get(), detail::memory_type(t.spec.dtype), mspace.get(), fspace.get(), H5P_DEFAULT, out) < 0)
    throw IoError(path + ": reading " + p.dataset + " failed (truncated or corrupt file); resume from an earlier checkpoint");
}

void CheckpointReader::check_file_digest(std::size_t file_index, const std::string& sha256_hex) const {
  const auto& f = manifest_.files.at(file_index);
  if (sha256_hex != f.sha256)
    throw IoError((fs::path(folder_) / f.name).string() + ": SHA-256 " + sha256_hex.substr(0, 16) +
                  "... differs from the manifest's " + f.sha256.substr(0, 16) +
                  "... (file corrupt: flipped bytes?); resume from an earlier checkpoint");
}

void CheckpointReader::verify_pending_files() const {
  for (std::size_t i = 0; i < hash_pending_.size(); ++i) {
    if (!hash_pending_[i]) continue;
    check_file_digest(i, detail::sha256_file((fs::path(folder_) / manifest_.files[i].name).string()));
    hash_pending_[i] = 0;
  }
}

void CheckpointReader::read(const std::string& name, void* out) const {
  const TensorInfo& t = at(name);
  read_range(name, 0, t.spec.numel(), out);
  check_whole(t, out);
}

void CheckpointReader::check_whole(const TensorInfo& t, const void* out) const {
  const std::string& name = t.spec.name;
  const std::uint64_t got = piece_checksum(out, t.spec.numel(), t.spec.dtype, 0);
  if (got != t.checksum) {
    std::string files;
    for (const auto& p : t.pieces)
      if (files.find(p.file) == std::string::npos) files += (files.empty() ? "" : ", ") + p.file;
    throw IoError(folder_ + ": tensor '" + name + "' fails its checksum (" + format_checksum(got) + ", index says " +
                  format_checksum(t.checksum) + "): its data in " + files +
                  " is corrupt; resume from an earlier checkpoint");
  }
}

std::vector<float> CheckpointReader::read_floats(const std::string& name) const {
  const TensorInfo& t = at(name);
  if (t.spec.dtype != DType::kFloat32)
    throw UsageError(folder_ + ": tensor '" + name + "' is " + dtype_name(t.spec.dtype) + ", not float32");
  std::vector<float> out(std::size_t(t.spec.numel()));
  read(name, out.data());
  return out;
}

std::vector<float> CheckpointReader::read_floats(const std::string& name, std::int64_t offset, std::int64_t count) const {
  const TensorInfo& t = at(name);
  if (t.spec.dtype != DType::kFloat32)
    throw UsageError(folder_ + ": tensor '" + name + "' is " + dtype_name(t.spec.dtype) + ", not float32");
  std::vector<float> out(std::size_t(std::max<std::int64_t>(count, 0)));
  read_range(name, offset, count, out.data());
  return out;
}

std::vector<std::string> check_rank_files(const std::string& folder, const CheckpointManifest& manifest) {
  std::vector<std::string> verdicts;
  for (const auto& f : manifest.files) {
    const std::string path = (fs::path(folder) / f.name).string();
    std::error_code ec;
    const bool present = fs::exists(path, ec);
    const auto size = present ? std::int64_t(fs::file_size(path, ec)) : -1;
    if (!present) {
      verdicts.push_back("missing");
    } else if (size != f.bytes) {
      verdicts.push_back(std::to_string(size) + " bytes, the manifest records " + std::to_string(f.bytes) +
                         " (truncated or overwritten)");
    } else {
      const std::string sha = detail::sha256_file(path);
      verdicts.push_back(sha == f.sha256 ? "OK"
                                         : "SHA-256 " + sha.substr(0, 16) + "... differs from the manifest's " +
                                               f.sha256.substr(0, 16) + "... (file corrupt: flipped bytes?)");
    }
  }
  return verdicts;
}

std::string validate_checkpoint(const std::string& folder, const ReadOptions& options) {
  try {
    CheckpointReader reader(folder, options);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace shardtrain::ckpt
