#include "shardtrain/ckpt/format.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/sha256.hpp"

namespace shardtrain::ckpt {

std::int64_t TensorSpec::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<FlatRange> spread_ranges(const std::vector<TensorSpec>& tensors, int world_size, int rank) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw UsageError("spread_ranges: rank " + std::to_string(rank) + " outside world size " + std::to_string(world_size));
  std::int64_t total = 0;
  for (const auto& t : tensors) total += t.bytes();
  // Rank r owns bytes [total*r/W, total*(r+1)/W) of the concatenation, each boundary moved down to
  // the start of the element it falls in (so every element has exactly one owner).
  auto boundary = [&](int r) -> std::pair<std::size_t, std::int64_t> {  // (tensor, element offset)
    // floor(total * r / W) without overflow: total = q W + rem.
    const std::int64_t b = (total / world_size) * r + (total % world_size) * r / world_size;
    std::int64_t start = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const std::int64_t bytes = tensors[i].bytes();
      if (b < start + bytes) return {i, (b - start) / std::int64_t(dtype_size(tensors[i].dtype))};
      start += bytes;
    }
    return {tensors.size(), 0};
  };
  const auto [t0, e0] = boundary(rank);
  const auto [t1, e1] = boundary(rank + 1);
  std::vector<FlatRange> out;
  for (std::size_t i = t0; i <= t1 && i < tensors.size(); ++i) {
    const std::int64_t begin = (i == t0) ? e0 : 0;
    const std::int64_t end = (i == t1) ? e1 : tensors[i].numel();
    if (end > begin) out.push_back({i, begin, end - begin});
  }
  return out;
}

std::vector<PieceView> spread_pieces(const std::vector<TensorSpec>& tensors, const std::vector<const void*>& data,
                                     int world_size, int rank) {
  if (data.size() != tensors.size())
    throw UsageError("spread_pieces: " + std::to_string(data.size()) + " data pointers for " +
                     std::to_string(tensors.size()) + " tensors");
  std::vector<PieceView> out;
  for (const auto& r : spread_ranges(tensors, world_size, rank)) {
    const auto& t = tensors[r.tensor];
    out.push_back({t.name, r.offset, r.count,
                   static_cast<const unsigned char*>(data[r.tensor]) + r.offset * std::int64_t(dtype_size(t.dtype))});
  }
  return out;
}

namespace {
inline std::uint64_t fmix64(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}
constexpr std::uint64_t kIndexKey = 0x5348415244434b50ULL;  // "SHARDCKP"

template <typename U>
std::uint64_t sum_terms(const unsigned char* p, std::int64_t count, std::int64_t offset) {
  // Several independent accumulators so the compiler vectorises the loop.
  std::uint64_t acc = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    U v;
    std::memcpy(&v, p + i * std::int64_t(sizeof(U)), sizeof(U));
    acc += (fmix64(std::uint64_t(offset + i) ^ kIndexKey) | 1ULL) * std::uint64_t(v);
  }
  return acc;
}
}  // namespace

std::uint64_t piece_checksum(const void* data, std::int64_t count, DType dtype, std::int64_t offset) {
  const auto* p = static_cast<const unsigned char*>(data);
  switch (dtype_size(dtype)) {
    case 1: return sum_terms<std::uint8_t>(p, count, offset);
    case 4: return sum_terms<std::uint32_t>(p, count, offset);
    case 8: return sum_terms<std::uint64_t>(p, count, offset);
  }
  return 0;
}

std::string format_checksum(std::uint64_t sum) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "sum64:%016llx", static_cast<unsigned long long>(sum));
  return buf;
}

std::uint64_t parse_checksum(const std::string& text) {
  const std::string prefix = std::string(kChecksumAlgorithm) + ":";
  if (text.size() != prefix.size() + 16 || text.compare(0, prefix.size(), prefix) != 0 ||
      text.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos)
    throw UsageError("checkpoint: checksum '" + text + "' is not of the form sum64:<16 hex digits>");
  return std::stoull(text.substr(prefix.size()), nullptr, 16);
}

std::string step_folder_name(std::int64_t step) {
  if (step < 0 || step > 99999999)
    throw UsageError("checkpoint: step " + std::to_string(step) + " does not fit step_<8 digits>");
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::int64_t parse_step_folder_name(const std::string& name) {
  if (name.size() != 13 || name.compare(0, 5, "step_") != 0) return -1;
  if (name.find_first_not_of("0123456789", 5) != std::string::npos) return -1;
  return std::stoll(name.substr(5));
}

std::string rank_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank_%05d.h5", rank);
  return buf;
}

// ---- manifest -------------------------------------------------------------------------------

std::string tensor_table_sha256(std::vector<TensorTableRow> rows) {
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.spec.name < b.spec.name; });
  std::string text;
  for (const auto& r : rows) {
    text.append(r.spec.name).append(" ").append(dtype_name(r.spec.dtype)).append(" ");
    for (std::size_t i = 0; i < r.spec.shape.size(); ++i) text.append(i ? "," : "").append(std::to_string(r.spec.shape[i]));
    text.append(" ").append(std::to_string(r.spec.numel())).append(" ").append(format_checksum(r.checksum)).append("\n");
  }
  return to_hex(sha256(text.data(), text.size()));
}

void CheckpointManifest::record_rewrite(const std::string& operation, const std::string& source) {
  history.push_back({{"operation", operation},
                     {"source", source},
                     {"step", step},
                     {"layout", json_fields::write(layout)},
                     {"writers", writers},
                     {"created", created},
                     {"code_version", code_version}});
}

CheckpointManifest CheckpointManifest::from_stored_text(const std::string& text, const std::string& sha256_hex,
                                                        const std::string& where) {
  if (to_hex(sha256(text.data(), text.size())) != sha256_hex)
    throw IoError(where + ": the manifest does not match its manifest_sha256 (corrupt); use an earlier checkpoint or another copy");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range 406 (a number past double)
    throw IoError(where + ": the manifest is not valid JSON (" + e.what() + ")");
  }
  return from_json(j, where);
}

int CheckpointManifest::read_format_version(const JsonFile& f, const std::string& pointer) {
  const int version = json_fields::small_integer(f, pointer);
  if (version != kFormatVersion)
    f.fail("field " + pointer + ": checkpoint format_version " + std::to_string(version) +
           " is not supported by this build (reads version " + std::to_string(kFormatVersion) +
           "); use a matching shardtrain version");
  return version;
}

nlohmann::json CheckpointManifest::read_history(const JsonFile& f, const std::string& pointer) {
  json_fields::array_size(f, pointer);
  return f.at(pointer);
}

void CheckpointManifest::validate(const JsonFile& f, const std::string&) const {
  if (int(files.size()) != writers)
    f.fail("lists " + std::to_string(files.size()) + " files for " + std::to_string(writers) + " writers");
}

CheckpointManifest CheckpointManifest::from_json(const nlohmann::json& j, const std::string& where) {
  return json_fields::read<CheckpointManifest>(JsonFile::parse(j.dump(), where, "the checkpoint manifest"), "");
}

}  // namespace shardtrain::ckpt
