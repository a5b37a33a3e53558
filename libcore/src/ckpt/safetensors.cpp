#include "shardtrain/ckpt/safetensors.hpp"

#include <bit>
#include <cstring>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"

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

}  // namespace shardtrain::ckpt
