#include "shardtrain/h5file.hpp"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>

#include "shardtrain/error.hpp"

namespace shardtrain {
namespace {

// Silence HDF5's automatic error-stack printing: we report our own one-line errors.
void quiet_hdf5() {
  static bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

template <typename T>
hid_t native_type();
template <>
hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <>
hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }
template <>
hid_t native_type<std::int32_t>() { return H5T_NATIVE_INT32; }
template <>
hid_t native_type<std::int64_t>() { return H5T_NATIVE_INT64; }

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
  if (count && H5Dread(ds.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
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
void write_any(hid_t file, const std::string& path, const std::string& name, const std::vector<T>& data,
               const std::vector<std::int64_t>& dims) {
  make_parent_groups(file, name);
  std::vector<hsize_t> d(dims.begin(), dims.end());
  Handle space(H5Screate_simple(int(d.size()), d.data(), nullptr), H5Sclose);
  Handle ds(H5Dcreate2(file, name.c_str(), native_type<T>(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok() || H5Dwrite(ds.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0)
    throw IoError(path + ": cannot write dataset '" + name + "' (disk full or read-only?)");
}

template <typename T>
T read_attr_any(hid_t file, const std::string& path, const std::string& object, const std::string& name) {
  Handle attr(H5Aopen_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw UsageError(path + ": missing attribute '" + name + "' on '" + object + "'");
  T value{};
  if (H5Aread(attr.get(), native_type<T>(), &value) < 0)
    throw UsageError(path + ": attribute '" + name + "' is not numeric");
  return value;
}

template <typename T>
void write_attr_any(hid_t file, const std::string& path, const std::string& object, const std::string& name, T value) {
  if (H5Aexists_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate_by_name(file, object.c_str(), name.c_str(), native_type<T>(), space.get(), H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), native_type<T>(), &value) < 0)
    throw IoError(path + ": cannot write attribute '" + name + "'");
}

}  // namespace

H5File::H5File(const std::string& path, Mode mode) : path_(path) {
  quiet_hdf5();
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
  write_any(file_, path_, d, data, dims);
}
void H5File::write_doubles(const std::string& d, const std::vector<double>& data, const std::vector<std::int64_t>& dims) {
  write_any(file_, path_, d, data, dims);
}

double H5File::read_attr_double(const std::string& name, const std::string& object) const {
  return read_attr_any<double>(file_, path_, object, name);
}
std::int64_t H5File::read_attr_int(const std::string& name, const std::string& object) const {
  return read_attr_any<std::int64_t>(file_, path_, object, name);
}

std::string H5File::read_attr_string(const std::string& name, const std::string& object) const {
  Handle attr(H5Aopen_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw UsageError(path_ + ": missing attribute '" + name + "' on '" + object + "'");
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) throw UsageError(path_ + ": attribute '" + name + "' is not a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    char* value = nullptr;
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    if (H5Aread(attr.get(), mem.get(), &value) < 0 || !value) throw UsageError(path_ + ": unreadable attribute '" + name + "'");
    std::string out(value);
    H5free_memory(value);
    return out;
  }
  // Fixed length, possibly without a terminating NUL: read size bytes and trim padding.
  const std::size_t size = H5Tget_size(type.get());
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0) throw UsageError(path_ + ": unreadable attribute '" + name + "'");
  while (!out.empty() && (out.back() == '\0' || out.back() == ' ')) out.pop_back();
  return out;
}

void H5File::write_attr(const std::string& name, double value, const std::string& object) {
  write_attr_any(file_, path_, object, name, value);
}
void H5File::write_attr(const std::string& name, std::int64_t value, const std::string& object) {
  write_attr_any(file_, path_, object, name, value);
}
void H5File::write_attr(const std::string& name, const std::string& value, const std::string& object) {
  if (H5Aexists_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate_by_name(file_, object.c_str(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                H5P_DEFAULT),
              H5Aclose);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), padded.data()) < 0)
    throw IoError(path_ + ": cannot write attribute '" + name + "'");
}

std::vector<std::string> H5File::list(const std::string& group) const {
  Handle g(H5Gopen2(file_, group.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.ok()) throw UsageError(path_ + ": no group '" + group + "'");
  H5G_info_t info;
  H5Gget_info(g.get(), &info);
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    ssize_t len = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    std::string name(len, '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), len + 1, H5P_DEFAULT);
    names.push_back(name);
  }
  return names;
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
