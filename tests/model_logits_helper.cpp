// Test helper for the GPT-2 export check (tests/scripts/ckpt_reshard.sh, tests/clients/check-gpt2-export.py):
// loads the parameters of a checkpoint (or consolidated file) into shardtrain's decoder on the CPU
// backend, runs the forward pass on a fixed batch and writes the tokens and shardtrain's logits as
// a safetensors file (both F32; token ids < 2^24 are exact), which the Python check reads with its
// own parser and compares against the logits of a GPT-2 module built from the exported weights.
//
//   model_logits_helper CKPT OUT.safetensors [BATCH]
// Tokens: tokens[b][t] = (7 + 131 b + 17 t + (t*t) mod 11) mod vocab, shape (BATCH, seq_len + 1);
// logits: (BATCH, seq_len, vocab) for inputs tokens[:, :-1].
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/ckpt/consolidated.hpp"
#include "shardtrain/ckpt/safetensors.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/model/parameters.hpp"

using namespace shardtrain;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: model_logits_helper CKPT OUT.safetensors [BATCH]\n");
    return 2;
  }
  try {
    const int batch = argc > 3 ? std::atoi(argv[3]) : 2;
    const auto source = ckpt::open_tensor_source(argv[1]);
    const ModelConfig config = ModelConfig::from_json(source->manifest().model);
    const ParameterRegistry registry(config);
    std::vector<float> flat(registry.total());
    for (const auto& t : registry.tensors())
      source->read_range(t.name, 0, std::int64_t(t.numel), flat.data() + t.offset);
    const int T = config.seq_len;
    std::vector<std::int32_t> tokens(std::size_t(batch) * (T + 1));
    for (int b = 0; b < batch; ++b)
      for (int t = 0; t <= T; ++t) tokens[std::size_t(b) * (T + 1) + t] = (7 + 131 * b + 17 * t + (t * t) % 11) % config.vocab;
    auto backend = make_cpu_backend(1);
    GptModel model(*backend, config, batch);
    model.set_parameters(flat);
    model.forward(tokens.data(), batch);
    const std::vector<float> logits = model.download_logits();
    std::vector<ckpt::SafetensorsTensor> out(2);
    out[0].name = "tokens";
    out[0].dtype = "F32";
    out[0].shape = {batch, T + 1};
    for (auto id : tokens) {
      const float f = float(id);
      out[0].data.insert(out[0].data.end(), reinterpret_cast<const unsigned char*>(&f), reinterpret_cast<const unsigned char*>(&f) + 4);
    }
    out[1].name = "logits";
    out[1].dtype = "F32";
    out[1].shape = {batch, T, config.vocab};
    out[1].data.resize(logits.size() * 4);
    std::memcpy(out[1].data.data(), logits.data(), out[1].data.size());
    ckpt::write_safetensors(argv[2], out, {{"source", argv[1]}});
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_logits_helper: %s\n", e.what());
    return 1;
  }
}
