// A small writer and reader of the safetensors format (Hugging Face), so a trained model leaves the toolkit in
// a file PyTorch users load with safetensors.torch.load_file or transformers' from_pretrained.
// Debian 12 packages no C or C++ safetensors library, hence this code.
//
// The format, as written here:
//   bytes 0..7     N: the header length, unsigned 64-bit little-endian
//   bytes 8..8+N   the header: a UTF-8 JSON object; for each tensor
//                    "<name>": {"dtype": "F32" | "BF16", "shape": [d0, d1, ...],
//                               "data_offsets": [begin, end]}
//                  (byte offsets into the data section, end exclusive), plus "__metadata__", an
//                  object of string -> string. Keys in sorted order; the header is padded with
//                  spaces to a multiple of 8 bytes so the data section starts 8-byte aligned.
//   bytes 8+N..    the data section: each tensor's elements row-major, little-endian, packed in
//                  header (sorted-name) order, no gaps, no overlaps (what the format requires).
// BF16 data: the rounding of backend/bf16.hpp (float_to_bf16_bits: to nearest, ties to even).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardtrain::ckpt {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;                 // "F32" or "BF16"
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> data;   // product(shape) elements of dtype, little-endian
};

// Writes the tensors (names unique, data sized to the shape and dtype: UsageError otherwise) to
// `path` atomically (path.tmp, fsync, rename). Returns the file's size in bytes.
std::int64_t write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::vector<SafetensorsTensor> tensors;      // in header order (data as stored)
  std::map<std::string, std::string> metadata;
};

// Reads a safetensors file whole. Checks what the format requires: the header length within the
// file, a JSON object, every tensor's dtype known, data_offsets within the data section and
// matching shape x element size, no overlaps. Throws UsageError naming the file and the tensor.
SafetensorsFile read_safetensors(const std::string& path);

// The float32 values of a tensor stored as F32, BF16 or F16 (exact: every such value is a float).
// Throws UsageError for another dtype.
std::vector<float> safetensors_floats(const SafetensorsTensor& tensor);

}  // namespace shardtrain::ckpt
