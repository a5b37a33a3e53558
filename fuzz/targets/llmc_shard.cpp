// Fuzz target: an llm.c token shard (the 256-int header: magic, version, token count; the uint16
// tokens), through data::read_llmc_shard, which data-prep --llmc calls.
#include <cstdio>
#include <cstdlib>

#include "fuzz_target.hpp"
#include "shardtrain/data/llmc_shard.hpp"

SHARDTRAIN_FUZZ_TARGET(llmc_shard) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("shard.bin", fuzz::as_text(data, size));
  std::uint64_t tokens = 0;
  data::LlmcShardInfo info;
  fuzz::expect_reader_contract(path, [&] {
    info = data::read_llmc_shard(path, std::uint32_t(data::kGpt2EndOfText),
                                 [&](const std::vector<std::uint32_t>& document) { tokens += document.size(); });
  });
  // A shard read whole delivers no more tokens than its header says (separators are not delivered).
  if (info.bytes > 0 && tokens > info.tokens) {
    std::fprintf(stderr, "llmc_shard: %llu tokens delivered for a header of %llu\n", (unsigned long long)tokens,
                 (unsigned long long)info.tokens);
    std::abort();
  }
}
