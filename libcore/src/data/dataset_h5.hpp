// The HDF5 helpers the dataset writer (dataset.cpp) and reader (dataset_reader.cpp) share:
// handles, checked calls, the UTF-8 string type, root attributes, the token types by width.
#pragma once
#include <hdf5.h>

#include <optional>
#include <string>

#include "base/h5_detail.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain::data::dataset_h5 {

using Hid = h5detail::Handle;
using h5detail::quiet_hdf5;

inline void check(herr_t status, const std::string& what) {
  if (status < 0) throw IoError(what);
}
inline Hid checked(hid_t id, herr_t (*closer)(hid_t), const std::string& what) {
  if (id < 0) throw IoError(what);
  return Hid(id, closer);
}

inline Hid vlen_string_type() { return h5detail::vlen_string_type(H5T_CSET_UTF8); }

// Root attributes: written once each (a repeated name fails creation), numbers little-endian,
// strings fixed-length UTF-8, NUL-padded; read back as nullopt when missing or of another type.
inline void check_attr_written(h5detail::WriteResult result, const char* name) {
  if (result == h5detail::WriteResult::kCreateFailed) throw IoError(std::string("cannot create attribute ") + name);
  if (result == h5detail::WriteResult::kWriteFailed) throw IoError(std::string("cannot write attribute ") + name);
}
template <class T>
void write_attr(hid_t obj, const char* name, T v) {
  check_attr_written(h5detail::write_scalar_attr(obj, ".", name, h5detail::Type<T>::little_endian(), v), name);
}
inline void write_attr_str(hid_t obj, const char* name, const std::string& v) {
  check_attr_written(h5detail::write_string_attr(obj, ".", name, v, H5T_CSET_UTF8, H5T_STR_NULLPAD), name);
}

template <class T>
std::optional<T> read_attr(hid_t obj, const char* name) {
  return h5detail::read_scalar_attr<T>(obj, ".", name);
}
inline std::optional<std::string> read_attr_str(hid_t obj, const char* name) {
  constexpr h5detail::StringRead kStringRead{H5T_CSET_UTF8, true, h5detail::StringRead::kFromFirstNul};
  Hid a = h5detail::open_attr(obj, ".", name);
  if (!a.ok() || !h5detail::is_string(a.get())) return std::nullopt;
  return h5detail::read_string(a.get(), kStringRead);
}

inline hid_t token_file_type(int bits) {
  return bits == 8 ? H5T_STD_U8LE : bits == 16 ? H5T_STD_U16LE : H5T_STD_U32LE;
}
inline hid_t token_mem_type(int bits) {
  return bits == 8 ? H5T_NATIVE_UINT8 : bits == 16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32;
}

}  // namespace shardtrain::data::dataset_h5
