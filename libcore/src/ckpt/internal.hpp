// Private helpers shared by the ckpt_*.cpp files (not installed, not part of the API).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/h5_detail.hpp"
#include "shardtrain/ckpt/format.hpp"

namespace shardtrain::ckpt::detail {

// The shared HDF5 plumbing (h5_detail.hpp): per-thread error-stack silencing and an owning id.
using h5detail::quiet_hdf5;
using H5Id = h5detail::Handle;

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

// A rectangular block of a row-major N-d tensor that is contiguous in the flat order.
struct Block {
  std::vector<hsize_t> start, count;  // in the logical N-d space
  std::int64_t flat_begin = 0;        // first flat element of the block
  std::int64_t numel = 0;
};
// Cuts the flat range [a, b) of a row-major `shape` into such blocks: at most 2*ndim-1 of them.
std::vector<Block> blocks_of_range(const std::vector<hsize_t>& shape, std::int64_t a, std::int64_t b);

// Hex SHA-256 of a file's bytes; throws IoError naming the file.
std::string sha256_file(const std::string& path);

}  // namespace shardtrain::ckpt::detail
