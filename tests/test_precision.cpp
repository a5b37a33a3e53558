// Mixed precision pieces that run without a device: the host bf16 rounding (the operands the CUDA
// backend's bf16 products multiply), precision names, the datasheet peak table, and the backend
// interface's precision defaults. The device side (cuBLASLt bf16 products against fp32 products
// of these rounded operands) is in test_cuda_backend.cpp, tagged [gpu].
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/bf16.hpp"
#include "shardtrain/backend/peak.hpp"
#include "shardtrain/base/error.hpp"

using namespace shardtrain;

namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

}  // namespace

TEST_CASE("bf16 rounding: cases worked by hand", "[precision]") {
  // Near 1, bf16 values are 2^-7 apart.
  CHECK(round_to_bf16(1.0f) == 1.0f);
  CHECK(round_to_bf16(1.0f + 0x1p-9f) == 1.0f);                   // below half: down
  CHECK(round_to_bf16(1.0f + 0x1p-8f) == 1.0f);                   // tie, 1.0 has the even mantissa
  CHECK(round_to_bf16(1.0f + 0x1p-7f + 0x1p-8f) == 1.0f + 0x1p-6f);  // tie between odd 1+2^-7 and even 1+2^-6: up
  CHECK(round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);  // just above half: up
  CHECK(round_to_bf16(-3.0f) == -3.0f);
  CHECK(round_to_bf16(0.1f) == 0.10009765625f);  // 0.1 = 1.6 x 2^-4; 1.6 -> 1.6015625 (205/128)
  CHECK(bits_of(round_to_bf16(-0.0f)) == bits_of(-0.0f));
  CHECK(round_to_bf16(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(round_to_bf16(float_of(0x7f800001u))));  // a NaN whose payload sits in the dropped bits
  CHECK(std::isinf(round_to_bf16(std::numeric_limits<float>::max())));  // past the largest bf16: infinity
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80u);
  CHECK(bf16_bits_to_float(0xc040u) == -3.0f);
}

TEST_CASE("bf16 rounding: nearest of the two neighbours, ties to even, over random floats", "[precision]") {
  // Independent of the bit trick: the two bf16 neighbours of x are its truncation and the next
  // bf16 away from zero; the distances are compared in double (exact for these values).
  std::mt19937 gen(7);
  std::uniform_int_distribution<std::uint32_t> any_bits(0, 0xffffffffu);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = float_of(any_bits(gen));
    if (!std::isfinite(x)) continue;
    const float r = round_to_bf16(x);
    REQUIRE((bits_of(r) & 0xffffu) == 0u);  // representable in bf16
    const float down = float_of(bits_of(x) & 0xffff0000u);
    const float up = float_of((bits_of(x) & 0xffff0000u) + 0x10000u);  // may be infinity
    const double d_down = std::fabs(double(x) - double(down));
    const double d_up = std::isinf(up) ? std::numeric_limits<double>::infinity() : std::fabs(double(up) - double(x));
    float want;
    if (d_down < d_up) want = down;
    else if (d_up < d_down) want = up;
    else want = ((bits_of(down) >> 16) & 1u) == 0 ? down : up;  // tie: the even mantissa
    // Past the largest finite bf16, IEEE rounding gives infinity rather than the truncation.
    if (std::isinf(up) && (bits_of(x) & 0xffffu) >= 0x8000u) want = up;
    REQUIRE(bits_of(r) == bits_of(want));
    ++checked;
  }
  CHECK(checked > 190000);
}

TEST_CASE("precision names parse both ways and anything else is a usage error", "[precision]") {
  CHECK(parse_precision("bf16") == Precision::kBf16);
  CHECK(parse_precision("fp32") == Precision::kFp32);
  CHECK(std::string(precision_name(Precision::kBf16)) == "bf16");
  CHECK(std::string(precision_name(Precision::kFp32)) == "fp32");
  CHECK_THROWS_AS(parse_precision("fp16"), UsageError);
  CHECK_THROWS_WITH(parse_precision("BF16", "--precision"), Catch::Contains("--precision") && Catch::Contains("BF16"));
}

TEST_CASE("datasheet peaks: H100 and H200 forms are told apart, unknown devices have none", "[precision]") {
  // NVIDIA datasheet dense figures (peak.cpp cites them).
  CHECK(datasheet_peak_flops("NVIDIA H200", Precision::kBf16).value() == Approx(989e12));
  CHECK(datasheet_peak_flops("NVIDIA H200 NVL", Precision::kBf16).value() == Approx(835e12));
  CHECK(datasheet_peak_flops("NVIDIA H100 80GB HBM3", Precision::kBf16).value() == Approx(989.4e12));
  CHECK(datasheet_peak_flops("NVIDIA H100 PCIe", Precision::kBf16).value() == Approx(756e12));
  CHECK(datasheet_peak_flops("NVIDIA H100 NVL", Precision::kBf16).value() == Approx(835e12));
  CHECK(datasheet_peak_flops("NVIDIA A100-SXM4-80GB", Precision::kBf16).value() == Approx(312e12));
  CHECK(datasheet_peak_flops("NVIDIA H200", Precision::kFp32).value() == Approx(67e12));
  CHECK_FALSE(datasheet_peak_flops("", Precision::kFp32).has_value());
  CHECK_FALSE(datasheet_peak_flops("NVIDIA GeForce RTX 4090", Precision::kBf16).has_value());
}

TEST_CASE("the cpu backend computes in fp32 and keeps the full attention probabilities", "[precision]") {
  auto cpu = make_cpu_backend(1);
  CHECK(cpu->precision() == Precision::kFp32);
  CHECK(cpu->device_name().empty());
  CHECK(cpu->attention_state_elements(3, 4, 17) == 3u * 4u * 17u * 17u);
  CHECK_FALSE(datasheet_peak_flops(cpu->device_name(), cpu->precision()).has_value());
}
