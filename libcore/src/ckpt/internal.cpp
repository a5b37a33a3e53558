#include "internal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain::ckpt::detail {

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
// Checkpoint attributes: replaced when present, numbers as native int64, strings as UTF-8;
// fixed-length strings read back without their trailing NULs.
constexpr h5detail::StringRead kStringRead{H5T_CSET_ASCII, false, h5detail::StringRead::kTrailingNuls};

bool replace_attr(hid_t loc, const std::string& object, const std::string& name, hid_t space, const void* data) {
  h5detail::delete_attr(loc, object, name);
  return h5detail::write_attr(loc, object, name, H5T_NATIVE_INT64, space, H5T_NATIVE_INT64, data) ==
         h5detail::WriteResult::kOk;
}

H5Id open_attr_or_throw(hid_t loc, const std::string& object, const std::string& name, const std::string& file) {
  H5Id attr = h5detail::open_attr(loc, object, name);
  if (!attr.ok()) throw UsageError(file + ": missing attribute '" + name + "' on '" + object + "'");
  return attr;
}
}  // namespace

bool write_string_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& value) {
  h5detail::delete_attr(loc, object, name);
  return h5detail::write_string_attr(loc, object, name, value, H5T_CSET_UTF8, H5T_STR_NULLTERM) ==
         h5detail::WriteResult::kOk;
}

bool write_int_attr(hid_t loc, const std::string& object, const std::string& name, std::int64_t value) {
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  return replace_attr(loc, object, name, space.get(), &value);
}

bool write_int_array_attr(hid_t loc, const std::string& object, const std::string& name,
                          const std::vector<std::int64_t>& values) {
  // An empty array (a scalar tensor's shape) is stored as a null dataspace, with nothing to write.
  if (values.empty()) {
    H5Id space(H5Screate(H5S_NULL), H5Sclose);
    return replace_attr(loc, object, name, space.get(), nullptr);
  }
  const hsize_t n = values.size();
  H5Id space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  return replace_attr(loc, object, name, space.get(), values.data());
}

std::string read_string_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& file) {
  const H5Id attr = open_attr_or_throw(loc, object, name, file);
  if (!h5detail::is_string(attr.get()))
    throw UsageError(file + ": attribute '" + name + "' on '" + object + "' is not a string");
  auto value = h5detail::read_string(attr.get(), kStringRead);
  if (!value) throw UsageError(file + ": unreadable attribute '" + name + "' on '" + object + "'");
  return std::move(*value);
}

std::int64_t read_int_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& file) {
  const auto value = h5detail::read_scalar<std::int64_t>(open_attr_or_throw(loc, object, name, file).get());
  if (!value) throw UsageError(file + ": attribute '" + name + "' on '" + object + "' is not an integer");
  return *value;
}

std::vector<std::int64_t> read_int_array_attr(hid_t loc, const std::string& object, const std::string& name,
                                              const std::string& file) {
  const H5Id attr = open_attr_or_throw(loc, object, name, file);
  H5Id space(H5Aget_space(attr.get()), H5Sclose);
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) return {};
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<std::int64_t> out(n > 0 ? n : 0);
  if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_INT64, out.data()) < 0)
    throw UsageError(file + ": attribute '" + name + "' on '" + object + "' is not an integer array");
  return out;
}

std::vector<std::string> list_group(hid_t loc, const std::string& group) {
  return h5detail::list_group(loc, group).value_or(std::vector<std::string>{});
}

std::string piece_dataset_name(const std::string& tensor, std::int64_t offset) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020lld", static_cast<long long>(offset));
  return "/pieces/" + tensor + "/" + buf;
}

std::string sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path + ": cannot open for checksumming (" + std::strerror(errno) + ")");
  Sha256 hash;
  std::vector<unsigned char> buf(256u << 10);
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
  return to_hex(hash.digest());
}

// Cuts the flat range [a, b) of a row-major `shape` into rectangular blocks, each contiguous in the
// flat order: at most 2*ndim-1 of them.
std::vector<Block> blocks_of_range(const std::vector<hsize_t>& shape, std::int64_t a, std::int64_t b) {
  const std::size_t n = shape.size();
  std::vector<std::int64_t> stride(n, 1);
  for (std::size_t k = n; k-- > 1;) stride[k - 1] = stride[k] * std::int64_t(shape[k]);
  std::vector<Block> out;
  while (a < b) {
    for (std::size_t k = 0; k < n; ++k) {  // the largest aligned slab that fits
      if (a % stride[k] != 0 || a + stride[k] > b) continue;
      const std::int64_t index_k = (a / stride[k]) % std::int64_t(shape[k]);
      const std::int64_t count_k = std::min((b - a) / stride[k], std::int64_t(shape[k]) - index_k);
      Block blk;
      blk.start.resize(n);
      blk.count.resize(n);
      std::int64_t rest = a;
      for (std::size_t d = 0; d < n; ++d) {
        blk.start[d] = hsize_t(rest / stride[d]);
        rest %= stride[d];
        blk.count[d] = d < k ? 1 : (d == k ? hsize_t(count_k) : shape[d]);
      }
      blk.flat_begin = a;
      blk.numel = count_k * stride[k];
      out.push_back(std::move(blk));
      a += count_k * stride[k];
      break;
    }
  }
  return out;
}

}  // namespace shardtrain::ckpt::detail
