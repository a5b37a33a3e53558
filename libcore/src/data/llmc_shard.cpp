#include "shardtrain/data/llmc_shard.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "shardtrain/base/error.hpp"

namespace shardtrain::data {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "llm.c shards are little-endian; read them raw");

LlmcShardInfo read_llmc_shard(const std::string& path, std::uint32_t separator,
                              const std::function<void(const std::vector<std::uint32_t>&)>& on_document) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw IoError("cannot open " + path + ": " + std::strerror(errno));
  std::fseek(f.get(), 0, SEEK_END);
  const long size = std::ftell(f.get());
  std::fseek(f.get(), 0, SEEK_SET);
  std::int32_t header[kLlmcHeaderInts] = {};
  if (size < long(sizeof header) || std::fread(header, sizeof header, 1, f.get()) != 1)
    throw UsageError(path + ": not an llm.c token shard (shorter than its 1,024-byte header)");
  if (header[0] != kLlmcMagic)
    throw UsageError(path + ": not an llm.c token shard (magic " + std::to_string(header[0]) + ", expected " +
                     std::to_string(kLlmcMagic) + ")");
  if (header[1] != kLlmcVersion)
    throw UsageError(path + ": llm.c token shard version " + std::to_string(header[1]) + "; this version reads " +
                     std::to_string(kLlmcVersion) + " (uint16 tokens)");
  if (header[2] < 0) throw UsageError(path + ": llm.c token shard with a negative token count");
  LlmcShardInfo info;
  info.tokens = std::uint64_t(header[2]);
  info.bytes = std::uint64_t(size);
  if (info.bytes != sizeof header + 2 * info.tokens)
    throw UsageError(path + ": truncated or padded llm.c token shard: " + std::to_string(info.bytes) + " bytes for " +
                     std::to_string(info.tokens) + " tokens (expected " + std::to_string(sizeof header + 2 * info.tokens) + ")");
  Sha256 hash;
  hash.update(header, sizeof header);
  std::vector<std::uint16_t> block(std::size_t(1) << 20);
  std::vector<std::uint32_t> doc;
  std::uint64_t left = info.tokens;
  while (left > 0) {
    const std::size_t n = std::size_t(std::min<std::uint64_t>(left, block.size()));
    if (std::fread(block.data(), 2, n, f.get()) != n) throw IoError("cannot read " + path + ": " + std::strerror(errno));
    hash.update(block.data(), 2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      if (block[i] == separator) {
        if (!doc.empty()) on_document(doc);
        doc.clear();
      } else {
        doc.push_back(block[i]);
      }
    }
    left -= n;
  }
  if (!doc.empty()) on_document(doc);
  info.sha256_hex = to_hex(hash.digest());
  return info;
}

}  // namespace shardtrain::data
