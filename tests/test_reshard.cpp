// ckpt-reshard's building blocks (issue 14): the one definition of which pieces of the state a
// rank owns (state_layout.hpp) covers every element exactly once in every layout and puts ZeRO
// pieces inside the rank's shard (worked by hand from the shard formula); the bf16 rounding
// (hand-worked bit patterns); the safetensors writer's layout (parsed back here); the GPT-2 names.
// End to end (reshard, resume bitwise, consolidate, inspect, export): tests/scripts/ckpt_reshard.sh.
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/bf16.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/ckpt/safetensors.hpp"
#include "shardtrain/model/hf_export.hpp"
#include "shardtrain/model/hf_import.hpp"
#include "shardtrain/model/hf_tokenizer.hpp"
#include "shardtrain/model/train_state.hpp"
#include "shardtrain/parallel/state_layout.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {
ModelConfig awkward_config() {
  ModelConfig c;
  c.vocab = 97;  // sizes that do not divide W x 4096: shards cut tensors mid-row
  c.seq_len = 13;
  c.d_model = 24;
  c.n_layer = 2;
  c.n_head = 3;
  return c;
}
}  // namespace

TEST_CASE("state layout: every element of every state tensor has exactly one owner", "[reshard]") {
  const ParameterRegistry reg(awkward_config());
  const auto specs = checkpoint_tensors(reg);
  const std::size_t n = reg.tensors().size();
  for (int stage = 0; stage <= 3; ++stage)
    for (int world : {1, 2, 3, 4, 5, 7}) {
      std::vector<std::vector<int>> owners(specs.size());
      for (std::size_t i = 0; i < specs.size(); ++i) owners[i].assign(std::size_t(specs[i].numel()), 0);
      for (int r = 0; r < world; ++r)
        for (const auto& p : owned_state_pieces(reg, {world, stage}, r)) {
          REQUIRE(p.count > 0);
          auto& o = owners[std::size_t(p.kind) * n + p.tensor];
          REQUIRE(p.offset + p.count <= std::int64_t(o.size()));
          for (std::int64_t e = p.offset; e < p.offset + p.count; ++e) ++o[std::size_t(e)];
        }
      for (std::size_t i = 0; i < specs.size(); ++i)
        for (int c : owners[i]) {
          INFO("stage " << stage << ", world " << world << ", tensor " << specs[i].name);
          REQUIRE(c == 1);
        }
    }
}

TEST_CASE("state layout: ZeRO pieces lie in the rank's shard, stages 1-3 agree, DDP W=1 is whole tensors", "[reshard]") {
  const ParameterRegistry reg(awkward_config());
  const int world = 3;
  for (int r = 0; r < world; ++r) {
    const auto one = owned_state_pieces(reg, {world, 1}, r);
    for (int stage : {2, 3}) {
      const auto other = owned_state_pieces(reg, {world, stage}, r);
      REQUIRE(other.size() == one.size());
      for (std::size_t i = 0; i < one.size(); ++i)
        CHECK((other[i].tensor == one[i].tensor && other[i].offset == one[i].offset && other[i].count == one[i].count));
    }
    for (const auto& p : one) {
      // By hand: unit u is padded to a multiple of W x 4096; rank r owns [begin + r*shard, begin + (r+1)*shard).
      const auto& unit = reg.units()[p.unit];
      const std::size_t quantum = std::size_t(world) * Backend::kReductionChunk;
      const std::size_t shard = (unit.size() + quantum - 1) / quantum * quantum / world;
      const std::size_t first = reg.tensors()[p.tensor].offset + std::size_t(p.offset);
      CHECK(first >= unit.begin + r * shard);
      CHECK(first + std::size_t(p.count) <= std::min(unit.end, unit.begin + (r + 1) * shard));
    }
  }
  const auto whole = owned_state_pieces(reg, {1, 0}, 0);
  REQUIRE(whole.size() == 3 * reg.tensors().size());
  for (const auto& p : whole) CHECK((p.offset == 0 && p.count == std::int64_t(reg.tensors()[p.tensor].numel)));
  CHECK_THROWS_AS(owned_state_pieces(reg, {2, 1, 2}, 0), UsageError);  // tp 2 needs rank 0's TP-shard registry
  CHECK_THROWS_AS(owned_state_pieces(reg, {3, 1, 2}, 0), UsageError);  // tp 2 does not divide 3 ranks
  CHECK_THROWS_AS(owned_state_pieces(reg, {2, 4}, 0), UsageError);
  CHECK_THROWS_AS(owned_state_pieces(reg, {2, 1}, 2), UsageError);
}

TEST_CASE("state layout, tensor parallel: every logical element has exactly one owner, and pieces are local runs", "[reshard][tp]") {
  ModelConfig c = awkward_config();
  c.n_head = 4;  // splits 2 and 4 ways; vocab 97 is padded (the padding rows belong to no piece)
  const ParameterRegistry full(c);
  const auto specs = checkpoint_tensors(full);
  const std::size_t n = full.tensors().size();
  for (int tp : {2, 4})
    for (int stage = 0; stage <= 3; ++stage)
      for (int dp : {1, 2, 3}) {
        const StateLayout layout{dp * tp, stage, tp};
        std::vector<ParameterRegistry> local;
        for (int t = 0; t < tp; ++t) local.emplace_back(c, TensorParallelPlace{tp, t});
        std::vector<std::vector<int>> owners(specs.size());
        for (std::size_t i = 0; i < specs.size(); ++i) owners[i].assign(std::size_t(specs[i].numel()), 0);
        for (int r = 0; r < layout.world; ++r) {
          const ParameterRegistry& reg = local[std::size_t(r % tp)];
          for (const auto& p : owned_state_pieces(reg, layout, r)) {
            REQUIRE(p.count > 0);
            const ParameterInfo& t = reg.tensors()[p.tensor];
            REQUIRE(t.name == full.tensors()[p.tensor].name);
            // The piece is contiguous in the local buffer and inside the local tensor...
            REQUIRE(p.local >= t.offset);
            REQUIRE(p.local + std::size_t(p.count) <= t.offset + t.numel);
            // ...and inside one logical run, at the logical offset that run gives it.
            bool in_run = false;
            for (const auto& run : reg.runs(t)) {
              const std::size_t first = t.offset + run.local_offset;
              if (p.local >= first && p.local + std::size_t(p.count) <= first + run.count)
                in_run = std::size_t(p.offset) == run.logical_offset + (p.local - first);
            }
            REQUIRE(in_run);
            if (stage > 0 && t.split == TpSplit::kReplicated) REQUIRE(r % tp == 0);  // ZeRO: TP rank 0 writes replicas
            auto& o = owners[std::size_t(p.kind) * n + p.tensor];
            for (std::int64_t e = p.offset; e < p.offset + p.count; ++e) ++o[std::size_t(e)];
          }
        }
        for (std::size_t i = 0; i < specs.size(); ++i)
          for (int count : owners[i]) {
            INFO("tp " << tp << ", stage " << stage << ", dp " << dp << ", tensor " << specs[i].name);
            REQUIRE(count == 1);
          }
      }
  // A registry of another TP place than the rank's is refused.
  const ParameterRegistry shard1(c, TensorParallelPlace{2, 1});
  CHECK_THROWS_AS(owned_state_pieces(shard1, {4, 1, 2}, 0), UsageError);
  CHECK_NOTHROW(owned_state_pieces(shard1, {4, 1, 2}, 3));
}

TEST_CASE("bf16: round to nearest, ties to even, on hand-worked bit patterns", "[reshard]") {
  auto bf = [](std::uint32_t bits) { return float_to_bf16_bits(std::bit_cast<float>(bits)); };
  CHECK(bf(0x3f800000u) == 0x3f80);  // 1.0 exactly
  CHECK(bf(0x3f808000u) == 0x3f80);  // 1 + 2^-8: halfway, kept bit even -> down
  CHECK(bf(0x3f818000u) == 0x3f82);  // halfway, kept bit odd -> up to even
  CHECK(bf(0x3f808001u) == 0x3f81);  // just above halfway -> up
  CHECK(bf(0x3f807fffu) == 0x3f80);  // just below halfway -> down
  CHECK(bf(0xbf818000u) == 0xbf82);  // the sign does not change the rounding
  CHECK(bf(0x7f7fffffu) == 0x7f80);  // max float rounds to +inf (the nearest bf16 is inf)
  CHECK(bf(0x80000000u) == 0x8000);  // -0
  CHECK((bf(0x7fc00001u) & 0x7fc0) == 0x7fc0);  // NaN stays NaN
  CHECK((bf(0x7f800001u) & 0x7f80) == 0x7f80);
  CHECK((bf(0x7f800001u) & 0x007f) != 0);       // a signalling NaN does not become inf
}

TEST_CASE("safetensors: 8-byte length, sorted JSON header padded to 8, packed little-endian data", "[reshard]") {
  const std::string path = (std::filesystem::temp_directory_path() / "shardtrain_test.safetensors").string();
  std::filesystem::remove(path);
  std::vector<ckpt::SafetensorsTensor> t(2);
  t[0] = {"b", "F32", {2, 2}, {}};
  const float vals[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  t[0].data.assign(reinterpret_cast<const unsigned char*>(vals), reinterpret_cast<const unsigned char*>(vals) + 16);
  t[1] = {"a", "BF16", {3}, {0x80, 0x3f, 0x00, 0x40, 0x00, 0xc0}};  // 1, 2, -2
  const std::int64_t bytes = ckpt::write_safetensors(path, t, {{"k", "v"}});
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> blob((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(std::int64_t(blob.size()) == bytes);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | blob[std::size_t(i)];  // little-endian by hand
  CHECK(n % 8 == 0);
  const auto header = nlohmann::json::parse(std::string(blob.begin() + 8, blob.begin() + 8 + long(n)));
  CHECK(header["__metadata__"]["k"] == "v");
  CHECK(header["a"]["dtype"] == "BF16");
  CHECK(header["a"]["data_offsets"] == nlohmann::json::array({0, 6}));  // "a" sorts first
  CHECK(header["b"]["shape"] == nlohmann::json::array({2, 2}));
  CHECK(header["b"]["data_offsets"] == nlohmann::json::array({6, 22}));
  REQUIRE(blob.size() == 8 + n + 22);
  CHECK(std::memcmp(blob.data() + 8 + n + 6, vals, 16) == 0);
  CHECK(blob[8 + n] == 0x80);
  std::filesystem::remove(path);
  t[1].data.pop_back();
  CHECK_THROWS_AS(ckpt::write_safetensors(path, t), UsageError);  // data size disagrees with the shape
}

TEST_CASE("GPT-2 export names: Hugging Face names, Conv1D transposes, tied head", "[reshard]") {
  const auto names = hf_gpt2_names(awkward_config());
  REQUIRE(names.size() == 4 + 12 * 2);
  std::map<std::string, HfTensorName> by;
  int transposed = 0;
  for (const auto& n : names) {
    by[n.ours] = n;
    transposed += n.transpose;
  }
  CHECK(transposed == 4 * 2);
  CHECK(by["wte.weight"].hf == "transformer.wte.weight");
  CHECK(by["h.1.attn.qkv.weight"].hf == "transformer.h.1.attn.c_attn.weight");
  CHECK(by["h.1.attn.qkv.weight"].transpose);
  CHECK(by["h.0.mlp.proj.bias"].hf == "transformer.h.0.mlp.c_proj.bias");
  CHECK(!by["h.0.mlp.proj.bias"].transpose);
  CHECK(by["ln_f.weight"].hf == "transformer.ln_f.weight");
  const auto config = hf_gpt2_config(awkward_config(), ExportDType::kBFloat16);
  CHECK(config["n_embd"] == 24);
  CHECK(config["n_positions"] == 13);
  CHECK(config["activation_function"] == "gelu_new");
  CHECK(config["torch_dtype"] == "bfloat16");
}

TEST_CASE("Hugging Face byte tokenizer: 256 distinct printable characters, the separator special", "[reshard][hf]") {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) seen.insert(hf_byte_alphabet(std::uint8_t(b)));
  CHECK(seen.size() == 256);
  CHECK(hf_byte_alphabet('A') == "A");
  CHECK(hf_byte_alphabet(0) == "\u0100");    // the first byte that does not stand for itself
  CHECK(hf_byte_alphabet(' ') == "\u0120");  // GPT-2's familiar space
  CHECK(hf_byte_alphabet(0xAD) == "\u0143");
  const auto files = hf_byte_tokenizer_files(0, 64);
  const auto& vocab = files.at("tokenizer.json")["model"]["vocab"];
  CHECK(vocab.size() == 256);
  CHECK(vocab["<|endoftext|>"] == 0);
  CHECK(!vocab.contains("\u0100"));
  CHECK(files.at("tokenizer.json")["model"]["merges"].empty());
  CHECK(files.at("tokenizer_config.json")["model_max_length"] == 64);
  CHECK(files.at("tokenizer_config.json")["clean_up_tokenization_spaces"] == false);
  const auto config = hf_gpt2_config(awkward_config(), ExportDType::kFloat32, 0);
  CHECK(config["eos_token_id"] == 0);
  CHECK(config["pad_token_id"] == 0);
}

TEST_CASE("Hugging Face import: a GPT-2 config maps onto the decoder or is refused with the reason", "[reshard][hf]") {
  const nlohmann::json good = {{"model_type", "gpt2"}, {"vocab_size", 50257}, {"n_positions", 64}, {"n_embd", 64},
                               {"n_layer", 2},         {"n_head", 2},          {"activation_function", "gelu_new"},
                               {"layer_norm_epsilon", 1e-5}, {"n_inner", nullptr}};
  const ModelConfig c = model_config_from_hf(good, "config.json");
  CHECK(c.vocab == 50257);
  CHECK(c.seq_len == 64);
  CHECK(c.d_model == 64);
  const auto refused = [&](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json bad = good;
    bad[key] = value;
    CHECK_THROWS_WITH(model_config_from_hf(bad, "config.json"), Catch::Contains(why));
  };
  refused("model_type", "llama", "model_type 'llama' is not gpt2");
  refused("activation_function", "relu", "activation_function 'relu'");
  refused("layer_norm_epsilon", 1e-6, "layer_norm_epsilon");
  refused("n_inner", 100, "n_inner 100");
  refused("tie_word_embeddings", false, "untied");
  refused("n_ctx", 128, "beyond the model");
  refused("n_head", 3, "n_head");
  // Past int: refused by value, never its low 32 bits (4294967552 would read as a vocabulary of 256).
  refused("vocab_size", 4294967552LL, "field /vocab_size is out of range (got 4294967552)");
  refused("n_embd", -64, "field /n_embd is negative (got -64)");
  // A field of another type: refused by name, never nlohmann's type_error (the tool's internal error).
  refused("model_type", 2, "'model_type' is not a string");
  refused("scale_attn_weights", "yes", "'scale_attn_weights' is not true or false");
  refused("layer_norm_epsilon", "1e-5", "field /layer_norm_epsilon is not a number");
}

TEST_CASE("Hugging Face import: --model NAME checks config.json's shape, naming the field, both values and the file",
          "[reshard][hf]") {
  // GPT-2 small's config.json as the Hugging Face hub publishes it (the fields this reader takes).
  const nlohmann::json small = {{"model_type", "gpt2"}, {"vocab_size", 50257}, {"n_positions", 1024}, {"n_embd", 768},
                                {"n_layer", 12},        {"n_head", 12},         {"activation_function", "gelu_new"},
                                {"layer_norm_epsilon", 1e-5}};
  CHECK_NOTHROW(require_hf_shape(model_config_from_hf(small, "config.json"), "gpt2-small", "hub/config.json"));
  nlohmann::json six = small;  // distilgpt2's shape: GPT-2 small with 6 layers
  six["n_layer"] = 6;
  CHECK_THROWS_WITH(require_hf_shape(model_config_from_hf(six, "config.json"), "gpt2-small", "distil/config.json"),
                    Catch::Contains("distil/config.json") && Catch::Contains("n_layer 6 there, 12 in gpt2-small") &&
                        !Catch::Contains("n_embd"));
  CHECK_THROWS_WITH(require_hf_shape(model_config_from_hf(small, "config.json"), "gpt2-medium", "hub/config.json"),
                    Catch::Contains("n_embd 768 there, 1024 in gpt2-medium") &&
                        Catch::Contains("n_layer 12 there, 24 in gpt2-medium") &&
                        Catch::Contains("n_head 12 there, 16 in gpt2-medium") && !Catch::Contains("vocab_size"));
  CHECK_THROWS_WITH(require_hf_shape(model_config_from_hf(small, "config.json"), "gpt3", "hub/config.json"),
                    Catch::Contains("'gpt3' is not a known model"));

  // Through the tool: exit 2 before the weights are read (an empty model.safetensors here) and
  // before anything is written.
  const std::string dir = test::temp_dir("hf_model_check");
  std::filesystem::create_directories(dir + "/hf");
  std::ofstream(dir + "/hf/config.json") << six.dump();
  std::ofstream(dir + "/hf/model.safetensors").flush();
  test::ToolRun r = test::run_built_tool(
      "ckpt-reshard", {"--import", "hf", dir + "/hf", "--out", dir + "/ckpt", "--model", "gpt2-small"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains(dir + "/hf/config.json") && Catch::Contains("n_layer 6 there, 12 in gpt2-small"));
  CHECK_FALSE(std::filesystem::exists(dir + "/ckpt"));
  // Without --model the same folder passes the shape and is refused for its (empty) weights.
  r = test::run_built_tool("ckpt-reshard", {"--import", "hf", dir + "/hf", "--out", dir + "/ckpt"});
  CHECK(r.status != 0);
  CHECK_THAT(r.err, !Catch::Contains("is not the shape"));
  // --model is a check of an import only.
  r = test::run_built_tool("ckpt-reshard", {"--inspect", dir + "/hf", "--model", "gpt2-small"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--model goes with --import hf DIR"));
}
