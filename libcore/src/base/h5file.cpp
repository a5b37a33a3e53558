#include "shardtrain/base/h5file.hpp"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>

#include "h5_detail.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

using h5detail::Handle;
using h5detail::Type;

template <typename T>
std::vector<T> read_any(hid_t file, const std::string& path, const std::string& name, std::vector<std::int64_t>* dims) {
  Handle ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw UsageError(path + ": no dataset '" + name + "'");
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> d(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), d.data(), nullptr);
  std::size_t count = 1;
  for (auto x : d) count *= x;
  std::vector<T> out(count);
  if (count && H5Dread(ds.get(), Type<T>::native(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw UsageError(path + ": cannot read dataset '" + name + "' (corrupt file or incompatible type)");
  if (dims) dims->assign(d.begin(), d.end());
  return out;
}

void make_parent_groups(hid_t file, const std::string& name) {
  for (std::size_t pos = name.find('/', 1); pos != std::string::npos; pos = name.find('/', pos + 1)) {
    const std::string group = name.substr(0, pos);
    if (group.empty() || H5Lexists(file, group.c_str(), H5P_DEFAULT) > 0) continue;
    Handle g(H5Gcreate2(file, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  }
}

template <typename T>
void write_any(hid_t file, const std::string& path, const std::string& name, const T* data,
               const std::vector<std::int64_t>& dims) {
  make_parent_groups(file, name);
  std::vector<hsize_t> d(dims.begin(), dims.end());
  Handle space(H5Screate_simple(int(d.size()), d.data(), nullptr), H5Sclose);
  Handle ds(H5Dcreate2(file, name.c_str(), Type<T>::native(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok() || H5Dwrite(ds.get(), Type<T>::native(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw IoError(path + ": cannot write dataset '" + name + "' (disk full or read-only?)");
}

// Attributes: the file's own messages; values as H5File has always stored them (native numeric
// types, ASCII strings) and read them (fixed-length strings lose trailing NULs and spaces).
constexpr h5detail::StringRead kStringRead{H5T_CSET_ASCII, false, h5detail::StringRead::kTrailingNulsOrSpaces};

Handle open_attr_or_throw(hid_t file, const std::string& path, const std::string& object, const std::string& name) {
  Handle attr = h5detail::open_attr(file, object, name);
  if (!attr.ok()) throw UsageError(path + ": missing attribute '" + name + "' on '" + object + "'");
  return attr;
}

template <typename T>
T read_attr_any(hid_t file, const std::string& path, const std::string& object, const std::string& name) {
  const auto value = h5detail::read_scalar<T>(open_attr_or_throw(file, path, object, name).get());
  if (!value) throw UsageError(path + ": attribute '" + name + "' is not numeric");
  return *value;
}

void check_attr_written(h5detail::WriteResult result, const std::string& path, const std::string& name) {
  if (result != h5detail::WriteResult::kOk) throw IoError(path + ": cannot write attribute '" + name + "'");
}

template <typename T>
void write_attr_any(hid_t file, const std::string& path, const std::string& object, const std::string& name, T value) {
  h5detail::delete_attr(file, object, name);
  check_attr_written(h5detail::write_scalar_attr(file, object, name, Type<T>::native(), value), path, name);
}

}  // namespace

H5File::H5File(const std::string& path, Mode mode) : path_(path) {
  h5detail::quiet_hdf5();
  if (mode == Mode::kRead) {
    if (!std::filesystem::exists(path)) throw IoError(path + ": no such file");
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file_ < 0) throw UsageError(path + ": not a readable HDF5 file (truncated or corrupt?)");
  } else {
    file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file_ < 0) throw IoError(path + ": cannot create file (missing folder, permission or disk full?)");
  }
}

H5File::~H5File() {
  if (file_ >= 0) H5Fclose(file_);
}

bool H5File::exists(const std::string& object_path) const {
  // Check each component, since H5Lexists fails on a missing intermediate group.
  for (std::size_t pos = object_path.find('/', 1);; pos = object_path.find('/', pos + 1)) {
    const std::string prefix = object_path.substr(0, pos);
    if (!prefix.empty() && prefix != "/" && H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

std::vector<float> H5File::read_floats(const std::string& d, std::vector<std::int64_t>* dims) const {
  return read_any<float>(file_, path_, d, dims);
}
std::vector<double> H5File::read_doubles(const std::string& d, std::vector<std::int64_t>* dims) const {
  return read_any<double>(file_, path_, d, dims);
}
std::vector<std::int32_t> H5File::read_ints(const std::string& d, std::vector<std::int64_t>* dims) const {
  return read_any<std::int32_t>(file_, path_, d, dims);
}
void H5File::write_floats(const std::string& d, const std::vector<float>& data, const std::vector<std::int64_t>& dims) {
  write_any(file_, path_, d, data.data(), dims);
}

void H5File::write_floats(const std::string& d, const float* data, const std::vector<std::int64_t>& dims) {
  write_any(file_, path_, d, data, dims);
}

double H5File::read_attr_double(const std::string& name, const std::string& object) const {
  return read_attr_any<double>(file_, path_, object, name);
}
std::int64_t H5File::read_attr_int(const std::string& name, const std::string& object) const {
  return read_attr_any<std::int64_t>(file_, path_, object, name);
}

std::string H5File::read_attr_string(const std::string& name, const std::string& object) const {
  const Handle attr = open_attr_or_throw(file_, path_, object, name);
  if (!h5detail::is_string(attr.get())) throw UsageError(path_ + ": attribute '" + name + "' is not a string");
  auto value = h5detail::read_string(attr.get(), kStringRead);
  if (!value) throw UsageError(path_ + ": unreadable attribute '" + name + "'");
  return std::move(*value);
}

void H5File::write_attr(const std::string& name, double value, const std::string& object) {
  write_attr_any(file_, path_, object, name, value);
}
void H5File::write_attr(const std::string& name, std::int64_t value, const std::string& object) {
  write_attr_any(file_, path_, object, name, value);
}
void H5File::write_attr(const std::string& name, const std::string& value, const std::string& object) {
  h5detail::delete_attr(file_, object, name);
  check_attr_written(h5detail::write_string_attr(file_, object, name, value, H5T_CSET_ASCII, H5T_STR_NULLTERM),
                     path_, name);
}

std::vector<std::string> H5File::list(const std::string& group) const {
  auto names = h5detail::list_group(file_, group);
  if (!names) throw UsageError(path_ + ": no group '" + group + "'");
  return std::move(*names);
}

std::vector<H5File::DatasetInfo> H5File::list_datasets(const std::string& group) const {
  const std::string root = group.empty() ? "/" : group;
  {
    Handle g(H5Gopen2(file_, root.c_str(), H5P_DEFAULT), H5Gclose);
    if (!g.ok()) throw UsageError(path_ + ": no group '" + root + "'");
  }
  std::vector<DatasetInfo> out;
  // Depth-first over group members; `rel` is the path below `root`.
  std::vector<std::string> pending{""};
  while (!pending.empty()) {
    const std::string rel = pending.back();
    pending.pop_back();
    const std::string abs = rel.empty() ? root : (root == "/" ? "/" + rel : root + "/" + rel);
    for (const auto& member : list(abs)) {
      const std::string child_rel = rel.empty() ? member : rel + "/" + member;
      const std::string child_abs = abs == "/" ? "/" + member : abs + "/" + member;
      Handle obj(H5Oopen(file_, child_abs.c_str(), H5P_DEFAULT), H5Oclose);
      if (!obj.ok()) continue;  // dangling soft/external link
      const H5I_type_t kind = H5Iget_type(obj.get());
      if (kind == H5I_GROUP) {
        pending.push_back(child_rel);
      } else if (kind == H5I_DATASET) {
        DatasetInfo info;
        info.path = child_rel;
        Handle space(H5Dget_space(obj.get()), H5Sclose);
        const int rank = H5Sget_simple_extent_ndims(space.get());
        std::vector<hsize_t> d(rank > 0 ? rank : 0);
        if (rank > 0) H5Sget_simple_extent_dims(space.get(), d.data(), nullptr);
        info.dims.assign(d.begin(), d.end());
        Handle type(H5Dget_type(obj.get()), H5Tclose);
        const H5T_class_t cls = H5Tget_class(type.get());
        info.type_class = cls == H5T_FLOAT ? 'f' : cls == H5T_INTEGER ? 'i' : '?';
        info.element_bytes = H5Tget_size(type.get());
        out.push_back(std::move(info));
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const DatasetInfo& a, const DatasetInfo& b) { return a.path < b.path; });
  return out;
}

}  // namespace shardtrain
