// Private helpers shared by the ckpt_*.cpp files (not installed, not part of the API).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/ckpt_format.hpp"

namespace shardtrain::ckpt::detail {

// Turns off HDF5's automatic error-stack printing (we report one-line errors). Idempotent.
void quiet_hdf5();

// An HDF5 identifier closed with the right H5*close at scope exit.
class H5Id {
 public:
  H5Id() = default;
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Id() { reset(); }
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes now and reports whether the close succeeded (H5Fclose flushes: a full disk shows here).
  bool close() {
    if (id_ < 0) return true;
    const herr_t rc = close_(id_);
    id_ = -1;
    return rc >= 0;
  }
  void reset() {
    if (id_ >= 0) close_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

hid_t file_type(DType t);    // little-endian storage type
hid_t memory_type(DType t);  // native type

// Scalar/array attributes on an object (by path, relative to `loc`). Return false on failure.
bool write_string_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& value);
bool write_int_attr(hid_t loc, const std::string& object, const std::string& name, std::int64_t value);
bool write_int_array_attr(hid_t loc, const std::string& object, const std::string& name,
                          const std::vector<std::int64_t>& values);
// Readers throw UsageError "<file>: ..." naming the attribute.
std::string read_string_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& file);
std::int64_t read_int_attr(hid_t loc, const std::string& object, const std::string& name, const std::string& file);
std::vector<std::int64_t> read_int_array_attr(hid_t loc, const std::string& object, const std::string& name,
                                              const std::string& file);
// Link names of a group, in name order.
std::vector<std::string> list_group(hid_t loc, const std::string& group);

// Piece dataset name: 20-digit zero-padded offset, so name order is offset order.
std::string piece_dataset_name(const std::string& tensor, std::int64_t offset);

// Hex SHA-256 of a file's bytes; throws IoError naming the file.
std::string sha256_file(const std::string& path);

// Wall-clock seconds since an arbitrary epoch (steady clock).
double now_seconds();

}  // namespace shardtrain::ckpt::detail
