#include "ckpt_internal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "shardtrain/dataset.hpp"
#include "shardtrain/error.hpp"

namespace shardtrain::ckpt::detail {

void quiet_hdf5() {
  // The error-printing setting is per thread in a thread-safe HDF5 build (Debian's is): once per thread.
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

hid_t file_type(DType t) {
  switch (t) {
    case DType::kFloat32: return H5T_IEEE_F32LE;
    case DType::kFloat64: return H5T_IEEE_F64LE;
    case DType::kInt32: return H5T_STD_I32LE;
    case DType::kInt64: return H5T_STD_I64LE;
    case DType::kUInt64: return H5T_STD_U64LE;
    case DType::kUInt8: return H5T_STD_U8LE;
  }
  return -1;
}

hid_t memory_type(DType t) {
  switch (t) {
    case DType::kFloat32: return H5T_NATIVE_FLOAT;
    case DType::kFloat64: return H5T_NATIVE_DOUBLE;
    case DType::kInt32: return H5T_NATIVE_INT32;
    case DType::kInt64: return H5T_NATIVE_INT64;
    case DType::kUInt64: return H5T_NATIVE_UINT64;
    case DType::kUInt8: return H5T_NATIVE_UINT8;
  }
  return -1;
}

namespace {
bool write_attr_raw(hid_t loc, const std::string& object, const std::string& name, hid_t type, hid_t space,
                    const void* data) {
  if (H5Aexists_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT);
  H5Id attr(H5Acreate_by_name(loc, object.c_str(), name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Aclose);
  return attr.ok() && H5Awrite(attr.get(), type, data) >= 0;
}
}  // namespace

bool write_string_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& value) {
  H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  return write_attr_raw(loc, object, name, type.get(), space.get(), padded.data());
}

bool write_int_attr(hid_t loc, const std::string& object, const std::string& name, std::int64_t value) {
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  return write_attr_raw(loc, object, name, H5T_NATIVE_INT64, space.get(), &value);
}

bool write_int_array_attr(hid_t loc, const std::string& object, const std::string& name,
                          const std::vector<std::int64_t>& values) {
  // An empty array (a scalar tensor's shape) is stored as a null dataspace.
  if (values.empty()) {
    H5Id space(H5Screate(H5S_NULL), H5Sclose);
    if (H5Aexists_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
      H5Adelete_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT);
    H5Id attr(H5Acreate_by_name(loc, object.c_str(), name.c_str(), H5T_NATIVE_INT64, space.get(), H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
    return attr.ok();
  }
  const hsize_t n = values.size();
  H5Id space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  return write_attr_raw(loc, object, name, H5T_NATIVE_INT64, space.get(), values.data());
}

std::string read_string_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& file) {
  H5Id attr(H5Aopen_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw UsageError(file + ": missing attribute '" + name + "' on '" + object + "'");
  H5Id type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING)
    throw UsageError(file + ": attribute '" + name + "' on '" + object + "' is not a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    char* value = nullptr;
    H5Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    if (H5Aread(attr.get(), mem.get(), &value) < 0 || !value)
      throw UsageError(file + ": unreadable attribute '" + name + "' on '" + object + "'");
    std::string out(value);
    H5free_memory(value);
    return out;
  }
  const std::size_t size = H5Tget_size(type.get());
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0)
    throw UsageError(file + ": unreadable attribute '" + name + "' on '" + object + "'");
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

std::int64_t read_int_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& file) {
  H5Id attr(H5Aopen_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw UsageError(file + ": missing attribute '" + name + "' on '" + object + "'");
  std::int64_t v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, &v) < 0)
    throw UsageError(file + ": attribute '" + name + "' on '" + object + "' is not an integer");
  return v;
}

std::vector<std::int64_t> read_int_array_attr(hid_t loc, const std::string& object, const std::string& name,
                                              const std::string& file) {
  H5Id attr(H5Aopen_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw UsageError(file + ": missing attribute '" + name + "' on '" + object + "'");
  H5Id space(H5Aget_space(attr.get()), H5Sclose);
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) return {};
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<std::int64_t> out(n > 0 ? n : 0);
  if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_INT64, out.data()) < 0)
    throw UsageError(file + ": attribute '" + name + "' on '" + object + "' is not an integer array");
  return out;
}

std::vector<std::string> list_group(hid_t loc, const std::string& group) {
  H5Id g(H5Gopen2(loc, group.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.ok()) return {};
  H5G_info_t info;
  if (H5Gget_info(g.get(), &info) < 0) return {};
  std::vector<std::string> names;
  names.reserve(info.nlinks);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (len < 0) continue;
    std::string name(std::size_t(len), '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), std::size_t(len) + 1, H5P_DEFAULT);
    names.push_back(name);
  }
  return names;
}

std::string piece_dataset_name(const std::string& tensor, std::int64_t offset) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020lld", static_cast<long long>(offset));
  return "/pieces/" + tensor + "/" + buf;
}

std::string sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path + ": cannot open for checksumming (" + std::strerror(errno) + ")");
  data::Sha256 hash;
  std::vector<unsigned char> buf(8u << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw IoError(path + ": read error while checksumming (" + why + ")");
    }
    if (n == 0) break;
    hash.update(buf.data(), std::size_t(n));
  }
  ::close(fd);
  return data::to_hex(hash.digest());
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace shardtrain::ckpt::detail
