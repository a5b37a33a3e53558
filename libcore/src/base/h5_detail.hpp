// Private HDF5 plumbing shared by h5file.cpp, dataset.cpp and the ckpt_*.cpp files (not installed,
// not part of the API): an owning identifier, error-stack silencing, attribute and group helpers.
// Nothing here throws: helpers report failure through ok() / bool / std::optional / WriteResult, so
// every caller keeps its own error messages and exception types.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::h5detail {

// An HDF5 identifier closed with the matching H5?close at scope exit. Movable, not copyable.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes now and reports whether the close succeeded (H5Fclose flushes: a full disk shows here).
  bool close() {
    if (id_ < 0) return true;
    const herr_t rc = close_ ? close_(id_) : 0;
    id_ = -1;
    return rc >= 0;
  }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// Turns off HDF5's automatic error-stack printing (we report one-line errors) for the CALLING
// THREAD, once per thread: the setting is per thread in a thread-safe HDF5 build (Debian's is), so
// a process-wide "done" flag would leave other threads printing. This is the one silencing
// mechanism. It is deliberately not a scoped guard that restores the previous handler: every
// entry point that touches HDF5 (H5File, DatasetWriter/Reader, checkpoint read/write) calls it,
// and none of them relies on printing coming back afterwards.
void quiet_hdf5();

// Native (memory) and little-endian (file) HDF5 types of a C++ element type.
template <class T>
struct Type;
template <>
struct Type<float> {
  static hid_t native() { return H5T_NATIVE_FLOAT; }
  static hid_t little_endian() { return H5T_IEEE_F32LE; }
};
template <>
struct Type<double> {
  static hid_t native() { return H5T_NATIVE_DOUBLE; }
  static hid_t little_endian() { return H5T_IEEE_F64LE; }
};
template <>
struct Type<std::int32_t> {
  static hid_t native() { return H5T_NATIVE_INT32; }
  static hid_t little_endian() { return H5T_STD_I32LE; }
};
template <>
struct Type<std::int64_t> {
  static hid_t native() { return H5T_NATIVE_INT64; }
  static hid_t little_endian() { return H5T_STD_I64LE; }
};

// A variable-length C string type of character set `cset`.
Handle vlen_string_type(H5T_cset_t cset);

// ---- attributes of `object` (a path relative to `loc`; "." is loc itself) ----------------------
enum class WriteResult { kOk, kCreateFailed, kWriteFailed };

// Removes the attribute when present (the writers below do not replace: creation would fail).
void delete_attr(hid_t loc, const std::string& object, const std::string& name);
// Creates the attribute with `file_type` over `space`, then writes `data` (as `mem_type`); a null
// `data` only creates it (a null dataspace has nothing to write).
WriteResult write_attr(hid_t loc, const std::string& object, const std::string& name, hid_t file_type,
                       hid_t space, hid_t mem_type, const void* data);
// A scalar attribute stored as `file_type`, written from a native T.
template <class T>
WriteResult write_scalar_attr(hid_t loc, const std::string& object, const std::string& name, hid_t file_type,
                              T value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  return write_attr(loc, object, name, file_type, space.get(), Type<T>::native(), &value);
}
// A fixed-length string of max(1, size) bytes (an empty value stores one NUL).
WriteResult write_string_attr(hid_t loc, const std::string& object, const std::string& name,
                              const std::string& value, H5T_cset_t cset, H5T_str_t pad);

// Opens the attribute; !ok() when it or the object is missing.
Handle open_attr(hid_t loc, const std::string& object, const std::string& name);
// The value of an open scalar attribute converted to a native T; nullopt when unreadable as T.
template <class T>
std::optional<T> read_scalar(hid_t attr) {
  T value{};
  if (H5Aread(attr, Type<T>::native(), &value) < 0) return std::nullopt;
  return value;
}
// Both steps: nullopt when missing or not readable as T.
template <class T>
std::optional<T> read_scalar_attr(hid_t loc, const std::string& object, const std::string& name) {
  Handle attr = open_attr(loc, object, name);
  if (!attr.ok()) return std::nullopt;
  return read_scalar<T>(attr.get());
}

// Whether an open attribute has a string type.
bool is_string(hid_t attr);
// How a string attribute's value is recovered; each reader keeps the rule its files were made with.
struct StringRead {
  H5T_cset_t vlen_cset;     // character set of the memory type a variable-length value is read as
  bool vlen_null_is_empty;  // a NULL variable-length value reads as "" (otherwise: unreadable)
  enum Trim {
    kTrailingNuls,          // drop trailing NULs of a fixed-length value
    kTrailingNulsOrSpaces,  // drop trailing NULs and spaces
    kFromFirstNul,          // cut at the first NUL
  } fixed_trim;
};
// The value of an open string attribute (fixed or variable length); nullopt when unreadable.
std::optional<std::string> read_string(hid_t attr, const StringRead& how);

// Link names of a group, in name order; nullopt when the group cannot be opened or queried.
std::optional<std::vector<std::string>> list_group(hid_t loc, const std::string& group);

}  // namespace shardtrain::h5detail
