// Layout-independent initialisation (contract 4 of docs/ARCHITECTURE.md): Philox4x32-10 against the published known-answer
// vectors of Random123 (kat_vectors, philox4x32_10), shard-by-shard equals whole-tensor init, and
// the GPT-2 scheme's statistics.
#include <catch2/catch.hpp>

#include <cmath>

#include "shardtrain/model/init.hpp"

using namespace shardtrain;

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[init]") {
  using A4 = std::array<std::uint32_t, 4>;
  CHECK(philox4x32({0, 0, 0, 0}, {0, 0}) == A4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
        A4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
        A4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("a tensor initialised piece by piece equals the whole tensor, for any split", "[init]") {
  ModelConfig cfg{97, 17, 60, 2, 3};
  ParameterRegistry reg(cfg);
  const auto whole = init_parameters(reg, 42, cfg.n_layer);
  for (const auto& t : reg.tensors()) {
    for (std::size_t pieces : {2u, 3u, 7u}) {
      std::vector<float> assembled(t.numel);
      for (std::size_t p = 0; p < pieces; ++p) {
        const std::size_t begin = t.numel * p / pieces, end = t.numel * (p + 1) / pieces;
        init_tensor_range(t, 42, cfg.n_layer, begin, end - begin, assembled.data() + begin);
      }
      INFO(t.name << " in " << pieces << " pieces");
      CHECK(std::equal(assembled.begin(), assembled.end(), whole.begin() + t.offset));
    }
  }
}

TEST_CASE("initial values follow the GPT-2 scheme and depend on seed and tensor name", "[init]") {
  ModelConfig cfg{256, 64, 128, 4, 4};
  ParameterRegistry reg(cfg);
  const auto flat = init_parameters(reg, 7, cfg.n_layer);
  auto stats = [&](const std::string& name) {
    const auto& t = reg.find(name);
    double s = 0, s2 = 0;
    for (std::size_t i = 0; i < t.numel; ++i) {
      s += flat[t.offset + i];
      s2 += double(flat[t.offset + i]) * flat[t.offset + i];
    }
    const double mean = s / t.numel;
    return std::make_pair(mean, std::sqrt(s2 / t.numel - mean * mean));
  };
  // 32k-65k samples: the standard deviation's sampling error is ~0.4%, so 3% bounds are loose
  // enough never to flake and tight enough to catch a wrong scale (1/sqrt(2L) = 0.35 here).
  auto [m_wte, s_wte] = stats("wte.weight");
  CHECK(std::fabs(m_wte) < 0.001);
  CHECK(s_wte == Approx(0.02).epsilon(0.03));
  auto [m_proj, s_proj] = stats("h.2.mlp.proj.weight");
  CHECK(s_proj == Approx(0.02 / std::sqrt(8.0)).epsilon(0.03));
  const auto& gain = reg.find("h.1.ln_2.weight");
  const auto& bias = reg.find("h.1.attn.qkv.bias");
  for (std::size_t i = 0; i < gain.numel; ++i) CHECK(flat[gain.offset + i] == 1.0f);
  for (std::size_t i = 0; i < bias.numel; ++i) CHECK(flat[bias.offset + i] == 0.0f);
  // Different names give different streams; a different seed gives different values.
  const auto& a = reg.find("h.0.attn.qkv.weight");
  const auto& b = reg.find("h.1.attn.qkv.weight");
  CHECK_FALSE(std::equal(flat.begin() + a.offset, flat.begin() + a.offset + 100, flat.begin() + b.offset));
  const auto other = init_parameters(reg, 8, cfg.n_layer);
  CHECK(other[a.offset] != flat[a.offset]);
}

TEST_CASE("model config validation names the bad field", "[init][config]") {
  ModelConfig bad{97, 17, 60, 2, 7};
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("n_head = 7 does not divide d_model = 60"));
  ModelConfig zero{97, 0, 60, 2, 3};
  CHECK_THROWS_WITH(zero.validate(), Catch::Contains("seq_len"));
  CHECK(ModelConfig{256, 256, 256, 4, 4}.parameter_count() == 3290624);  // matches the PyTorch peer's count
}
