#include "shardtrain/ckpt/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"

namespace shardtrain::ckpt {

static_assert(std::endian::native == std::endian::little, "safetensors data is written as raw little-endian bytes");

std::int64_t write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::map<std::string, const SafetensorsTensor*> by_name;  // sorted: the data order
  for (const auto& t : tensors) {
    std::size_t element = t.dtype == "F32" ? 4 : t.dtype == "BF16" ? 2 : 0;
    if (element == 0) throw UsageError("safetensors: tensor '" + t.name + "' has dtype '" + t.dtype + "' (F32 or BF16)");
    std::int64_t numel = 1;
    for (auto d : t.shape) {
      if (d < 0) throw UsageError("safetensors: tensor '" + t.name + "' has a negative dimension");
      numel *= d;
    }
    if (std::int64_t(t.data.size()) != numel * std::int64_t(element))
      throw UsageError("safetensors: tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                       " bytes for " + std::to_string(numel) + " " + t.dtype + " elements");
    if (t.name.empty() || t.name == "__metadata__" || !by_name.emplace(t.name, &t).second)
      throw UsageError("safetensors: tensor name '" + t.name + "' is empty, reserved or repeated");
  }
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const auto& [name, t] : by_name) {
    header[name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->data.size()}}};
    offset += t->data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string content(8, '\0');
  const std::uint64_t n = text.size();
  std::memcpy(content.data(), &n, 8);
  content.reserve(8 + text.size() + offset);
  content += text;
  for (const auto& [name, t] : by_name) content.append(reinterpret_cast<const char*>(t->data.data()), t->data.size());
  write_file_atomically(path, content);
  return std::int64_t(content.size());
}

namespace {

std::size_t element_size(const std::string& dtype) {
  static const std::map<std::string, std::size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h >> 15) << 31;
  std::uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / NaN
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | std::uint32_t(127 - 15 - e) << 23 | (mant & 0x3FF) << 13;
    }
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

namespace {
// A key as one JSON pointer token (RFC 6901: "~" as "~0", "/" as "~1").
std::string json_pointer_key(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}
}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot open the safetensors file");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t n = 0;
  if (content.size() < 8) throw UsageError(path + ": not a safetensors file (shorter than 8 bytes)");
  std::memcpy(&n, content.data(), 8);
  if (n > content.size() - 8) throw UsageError(path + ": not a safetensors file (header length beyond the file)");
  // The header by base/json_file.hpp's rules, its numbers by json_fields' (the one number rule).
  const JsonFile header_file = JsonFile::parse(content.substr(8, n), path, "the safetensors header");
  const nlohmann::json& header = header_file.json();
  if (!header.is_object()) throw UsageError(path + ": not a safetensors file (its header is not a JSON object)");
  const std::uint64_t data_size = content.size() - 8 - n;
  SafetensorsFile file;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : entry.items())
        if (v.is_string()) file.metadata[k] = v.get<std::string>();
      continue;
    }
    SafetensorsTensor t;
    t.name = name;
    // Every number an integer >= 0 as JSON has it (json_fields::counts): nlohmann's get<> would
    // cast a float (1e300) or a negative number to the integer type without a word.
    const std::string at = json_fields::field("", json_pointer_key(name));
    if (!entry.is_object()) throw UsageError(path + ": tensor '" + name + "' is not a JSON object");
    t.dtype = header_file.string(json_fields::field(at, "dtype"));
    const std::vector<std::uint64_t> dims = json_fields::counts(header_file, json_fields::field(at, "shape"));
    const std::vector<std::uint64_t> offsets = json_fields::counts(header_file, json_fields::field(at, "data_offsets"));
    const std::size_t element = element_size(t.dtype);
    if (element == 0) throw UsageError(path + ": tensor '" + name + "' has unknown dtype '" + t.dtype + "'");
    // The byte count, refused as soon as it passes the data section: a shape whose product wraps
    // around 2^64 would otherwise match a short range and read as a tensor of another shape.
    std::uint64_t bytes = element;
    for (std::uint64_t d : dims) {
      if (d > std::uint64_t(std::numeric_limits<std::int64_t>::max()) || (d != 0 && bytes > data_size / d))
        bytes = data_size + 1;  // larger than any range of the file
      else
        bytes *= d;
      t.shape.push_back(std::int64_t(d));
    }
    if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size || offsets[1] - offsets[0] != bytes)
      throw UsageError(path + ": tensor '" + name + "' has data_offsets outside the file or not matching its shape");
    ranges.push_back({offsets[0], offsets[1]});
    const char* begin = content.data() + 8 + n + offsets[0];
    t.data.assign(begin, begin + (offsets[1] - offsets[0]));
    file.tensors.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw UsageError(path + ": tensors overlap in the data section");
  return file;
}

std::vector<float> safetensors_floats(const SafetensorsTensor& t) {
  std::vector<float> out;
  if (t.dtype == "F32") {
    out.resize(t.data.size() / 4);
    std::memcpy(out.data(), t.data.data(), t.data.size());
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    out.resize(t.data.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::uint16_t h;
      std::memcpy(&h, t.data.data() + 2 * i, 2);
      out[i] = t.dtype == "BF16" ? std::bit_cast<float>(std::uint32_t(h) << 16) : half_to_float(h);
    }
  } else {
    throw UsageError("safetensors: tensor '" + t.name + "' is " + t.dtype + "; weights must be F32, BF16 or F16");
  }
  return out;
}

}  // namespace shardtrain::ckpt
