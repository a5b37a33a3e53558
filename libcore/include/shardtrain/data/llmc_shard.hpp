// llm.c's token shard format (the .bin files its and nanoGPT-style data scripts write for GPT-2),
// read by data-prep --llmc so tokens already prepared for GPT-2 train here unchanged.
//
// On disk (little-endian):
//   bytes 0..1023     header: 256 int32; [0] magic 20240520, [1] version 1, [2] N = token count,
//                     the rest unused (zero)
//   bytes 1024..      N uint16 tokens (GPT-2 ids, vocab 50,257); each document is PRECEDED by the
//                     end-of-text token 50,256 (its separator)
// The file's size must be exactly 1024 + 2 N bytes.
// Documents: the runs of tokens between separators (the first run may lack its leading separator;
// empty runs, e.g. before the first separator, are not documents). Every other token is kept, in
// order: joining the documents with one separator between them gives back the shard minus its
// leading separator(s) (and any separator repeated with nothing between).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shardtrain/base/sha256.hpp"

namespace shardtrain::data {

inline constexpr std::int32_t kLlmcMagic = 20240520;
inline constexpr std::int32_t kLlmcVersion = 1;
inline constexpr std::int64_t kLlmcHeaderInts = 256;
inline constexpr std::int64_t kGpt2Vocab = 50257;
inline constexpr std::int64_t kGpt2EndOfText = 50256;

struct LlmcShardInfo {
  std::uint64_t tokens = 0;     // N of the header
  std::uint64_t bytes = 0;      // the file's size
  std::string sha256_hex;       // of the file's bytes
};

// Reads `path`, calling on_document(tokens) for each document (split at `separator`) in order.
// Throws UsageError naming the file for a bad magic, version or size ("not an llm.c token shard",
// "truncated: ... bytes for N tokens"), IoError when it cannot be read.
LlmcShardInfo read_llmc_shard(const std::string& path, std::uint32_t separator,
                              const std::function<void(const std::vector<std::uint32_t>&)>& on_document);

}  // namespace shardtrain::data
