// The CPU backend's GEMM libraries (cpu_gemm.hpp): names, what the build links, the choice rule,
// the start-up measurement, and that every library computes the same products. (Every op on every
// linked library against the naive reference is test_kernels_*.cpp's, at its stated tolerances.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "naive_kernels.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "shardtrain/base/error.hpp"
#include "test_support.hpp"

namespace {

using shardtrain::GemmChoice;
using shardtrain::GemmLibrary;
using shardtrain::GemmLibraryRates;
using shardtrain::GemmShapeRate;

GemmLibraryRates rates_of(GemmLibrary library, double seconds_a, double seconds_b) {
  GemmLibraryRates r;
  r.library = library;
  r.shapes.push_back({"a", 2e9, seconds_a, 4});   // 4 x 2 GFLOP
  r.shapes.push_back({"b", 1e9, seconds_b, 1});   // 1 x 1 GFLOP
  return r;
}

}  // namespace

TEST_CASE("cpu gemm: names parse back, a wrong one is a usage error naming the choices", "[gemm]") {
  for (const auto& [name, value] : shardtrain::kGemmLibraryNames) {
    CHECK(shardtrain::parse_gemm_library(name) == value);
    CHECK(std::string(shardtrain::gemm_library_name(value)) == name);
  }
  try {
    shardtrain::parse_gemm_library("mkl");
    FAIL("mkl parsed");
  } catch (const shardtrain::UsageError& e) {
    CHECK(std::string(e.what()) == "--gemm: 'mkl' is not one of auto, onednn, openblas, blis");
    CHECK(e.code() == shardtrain::ExitCode::kUsage);
  }
}

TEST_CASE("cpu gemm: oneDNN is always linked and listed first, each linked library names its version", "[gemm]") {
  const std::vector<GemmLibrary> linked = shardtrain::linked_gemm_libraries();
  REQUIRE(!linked.empty());
  CHECK(linked.front() == GemmLibrary::kOneDnn);
  CHECK(std::find(linked.begin(), linked.end(), GemmLibrary::kAuto) == linked.end());
  for (GemmLibrary library : linked) {
    auto backend = shardtrain::make_cpu_backend(1, library);
    CHECK(shardtrain::cpu_gemm_library(*backend) == library);
    const std::string version = shardtrain::gemm_library_version(library);
    INFO(version);
    const char* label = library == GemmLibrary::kOneDnn ? "oneDNN " : library == GemmLibrary::kOpenBlas ? "OpenBLAS " : "BLIS ";
    CHECK(version.rfind(label, 0) == 0);
    CHECK(backend->describe().find(version) != std::string::npos);
    // The build links the OpenMP variants (cmake/gemm_libraries.cmake), so all share one pool.
    if (library != GemmLibrary::kOneDnn) CHECK(version.find("(openmp") != std::string::npos);
  }
  // What is not linked is refused with the package to install.
  for (GemmLibrary library : {GemmLibrary::kOpenBlas, GemmLibrary::kBlis}) {
    if (shardtrain::gemm_library_linked(library)) continue;
    try {
      shardtrain::require_gemm_library(library);
      FAIL("an unlinked library was accepted");
    } catch (const shardtrain::UsageError& e) {
      CHECK(std::string(e.what()).find("apt-get install") != std::string::npos);
    }
  }
  shardtrain::require_gemm_library(GemmLibrary::kAuto);  // never refused
}

TEST_CASE("cpu gemm: the choice takes the highest rate at the model's shapes, and only that rule", "[gemm]") {
  // onednn: 9 GFLOP in 4*1.0 + 0.5 = 4.5 s -> 2 GFLOP/s; openblas: 4*0.5 + 1.0 = 3 s -> 3; blis:
  // 4*0.8 + 0.1 = 3.3 s -> 2.73 (faster at shape b, slower over the step).
  std::vector<GemmLibraryRates> rates{rates_of(GemmLibrary::kOneDnn, 1.0, 0.5),
                                      rates_of(GemmLibrary::kOpenBlas, 0.5, 1.0),
                                      rates_of(GemmLibrary::kBlis, 0.8, 0.1)};
  CHECK(rates[0].gflops() == Approx(2.0));
  CHECK(rates[1].gflops() == Approx(3.0));
  CHECK(rates[2].gflops() == Approx(9.0 / 3.3));

  GemmChoice c = shardtrain::choose_gemm_library(GemmLibrary::kAuto, false, rates);
  CHECK(c.library == GemmLibrary::kOpenBlas);
  CHECK(c.chosen_flop_per_s() == Approx(3e9));
  CHECK(c.reason.find("fastest") != std::string::npos);
  CHECK(c.reason.find("openblas 3.0") != std::string::npos);

  // A tie keeps the earlier library of the table.
  std::vector<GemmLibraryRates> tie{rates_of(GemmLibrary::kOneDnn, 1.0, 0.5), rates_of(GemmLibrary::kOpenBlas, 0.8, 0.1),
                                    rates_of(GemmLibrary::kBlis, 0.8, 0.1)};
  CHECK(shardtrain::choose_gemm_library(GemmLibrary::kAuto, false, tie).library == GemmLibrary::kOpenBlas);

  // oneDNN, the default, is kept against a library less than kGemmSwitchMargin (5%) faster:
  // 4.5 s against 4.5 / 1.04 s is 4% faster, 4.5 / 1.06 s 6%.
  std::vector<GemmLibraryRates> close{rates_of(GemmLibrary::kOneDnn, 1.0, 0.5),
                                      rates_of(GemmLibrary::kBlis, 1.0 / 1.04, 0.5 / 1.04)};
  c = shardtrain::choose_gemm_library(GemmLibrary::kAuto, false, close);
  CHECK(c.library == GemmLibrary::kOneDnn);
  CHECK(c.reason.find("onednn kept: blis is within 5%") != std::string::npos);
  close[1] = rates_of(GemmLibrary::kBlis, 1.0 / 1.06, 0.5 / 1.06);
  CHECK(shardtrain::choose_gemm_library(GemmLibrary::kAuto, false, close).library == GemmLibrary::kBlis);

  // Deterministic mode never decides by timing.
  c = shardtrain::choose_gemm_library(GemmLibrary::kAuto, true, rates);
  CHECK(c.library == GemmLibrary::kOneDnn);
  CHECK(c.reason.find("deterministic") != std::string::npos);

  // Forced: that library, whatever was measured.
  c = shardtrain::choose_gemm_library(GemmLibrary::kOneDnn, false, rates);
  CHECK(c.library == GemmLibrary::kOneDnn);
  CHECK(c.reason.find("forced by --gemm onednn") != std::string::npos);
}

TEST_CASE("cpu gemm: the start-up measurement times every shape of the step and restores the library", "[gemm]") {
  auto backend = shardtrain::make_cpu_backend(1);
  shardtrain::GemmProbeModel m;
  m.batch = 2, m.seq_len = 32, m.channels = 48, m.attention_channels = 48, m.heads = 3, m.mlp_channels = 192;
  m.vocab = 61, m.layers = 2;
  const std::vector<GemmLibrary> linked = shardtrain::linked_gemm_libraries();
  const std::vector<GemmLibraryRates> rates = shardtrain::probe_gemm_libraries(*backend, m, linked, 1);
  CHECK(shardtrain::cpu_gemm_library(*backend) == GemmLibrary::kOneDnn);
  REQUIRE(rates.size() == linked.size());
  const double N = 64;
  // The model FLOPs of each product as MFU counts them, worked out here independently:
  // 6 N in out per linear layer (forward 2, backward 4), 12 B T^2 C for attention.
  const std::vector<std::pair<double, std::int64_t>> want{
      {6 * N * 48 * 144, 2}, {6 * N * 48 * 48, 2}, {6 * N * 48 * 192, 2}, {6 * N * 192 * 48, 2},
      {6 * N * 48 * 61, 1},  {12.0 * 2 * 32 * 32 * 48, 2}};
  for (std::size_t i = 0; i < rates.size(); ++i) {
    INFO(shardtrain::gemm_library_name(rates[i].library));
    CHECK(rates[i].library == linked[i]);
    REQUIRE(rates[i].shapes.size() == want.size());
    double flops = 0;
    for (std::size_t s = 0; s < want.size(); ++s) {
      INFO(rates[i].shapes[s].name);
      CHECK(rates[i].shapes[s].flops == want[s].first);
      CHECK(rates[i].shapes[s].per_step == want[s].second);
      CHECK(rates[i].shapes[s].seconds > 0);
      flops += want[s].first * double(want[s].second);
    }
    CHECK(rates[i].step_flops() == flops);
    CHECK(rates[i].gflops() > 0);
  }
}

TEST_CASE("cpu gemm: switching a backend's library changes its products only by rounding", "[gemm]") {
  // out = in @ w^T + b at a shape whose K (300) spans several of every library's blocks; each
  // library against a double-precision reference, kReduction (kernel_test_support.hpp: 1e-5 relative in
  // max norm) as the tolerance.
  const std::size_t N = 37, C = 300, OC = 45;
  const std::vector<float> in = shardtrain::test::random_floats(N * C, 11), w = shardtrain::test::random_floats(OC * C, 12),
                           b = shardtrain::test::random_floats(OC, 13);
  shardtrain::naive::Vec want(N * OC);
  shardtrain::naive::Vec bias = shardtrain::naive::to_double(b);
  shardtrain::naive::matmul_forward(want, shardtrain::naive::to_double(in), shardtrain::naive::to_double(w), &bias, N, C,
                                    OC);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  auto backend = shardtrain::make_cpu_backend(1);
  for (GemmLibrary library : shardtrain::linked_gemm_libraries()) {
    shardtrain::set_cpu_gemm_library(*backend, library);
    auto din = shardtrain::test::to_device(*backend, in), dw = shardtrain::test::to_device(*backend, w),
         db = shardtrain::test::to_device(*backend, b);
    shardtrain::DeviceArray<float> out(*backend, N * OC);
    backend->matmul_forward(out.data(), din.data(), dw.data(), db.data(), N, C, OC);
    const std::vector<float> got = shardtrain::test::to_host(out);
    double err = 0;
    for (std::size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(double(got[i]) - want[i]));
    INFO(shardtrain::gemm_library_name(library) << ": relative error " << err / scale);
    CHECK(err / scale <= 1e-5);
  }
  CHECK_THROWS_AS(shardtrain::set_cpu_gemm_library(*backend, GemmLibrary::kAuto), shardtrain::UsageError);
}

TEST_CASE("cpu gemm: a decision survives the cache file, keyed by model and threads, and the cache can be off",
          "[gemm]") {
  const std::string dir = (std::filesystem::temp_directory_path() / ("gemm-cache-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  const char* before = std::getenv("SHARDTRAIN_GEMM_CACHE");
  const std::string saved = before ? before : "";
  ::setenv("SHARDTRAIN_GEMM_CACHE", dir.c_str(), 1);
  shardtrain::GemmProbeModel m;
  m.batch = 8, m.seq_len = 256, m.channels = 256, m.attention_channels = 256, m.heads = 4, m.mlp_channels = 1024;
  m.vocab = 256, m.layers = 4;
  const std::string path = shardtrain::gemm_cache_path(m, 1);
  CHECK(path.rfind(dir + "/", 0) == 0);
  CHECK(shardtrain::gemm_cache_path(m, 2) != path);  // another thread count is another key
  shardtrain::GemmProbeModel wider = m;
  wider.channels = 512;
  CHECK(shardtrain::gemm_cache_path(wider, 1) != path);
  CHECK_FALSE(shardtrain::read_gemm_cache(path));  // nothing yet

  GemmChoice want = shardtrain::choose_gemm_library(
      GemmLibrary::kAuto, false, {rates_of(GemmLibrary::kOneDnn, 1.0, 0.5), rates_of(GemmLibrary::kOneDnn, 2.0, 0.5)});
  REQUIRE(shardtrain::write_gemm_cache(path, want));
  const auto got = shardtrain::read_gemm_cache(path);
  REQUIRE(got);
  CHECK(got->library == want.library);
  CHECK(got->reason == want.reason);
  REQUIRE(got->rates.size() == 2);
  CHECK(got->rates[1].shapes[0].seconds == 2.0);
  CHECK(got->chosen_flop_per_s() == Approx(want.chosen_flop_per_s()));

  // A damaged file is no decision (the next start measures and overwrites it).
  std::ofstream(path) << "{\"library\": 7";
  CHECK_FALSE(shardtrain::read_gemm_cache(path));

  ::setenv("SHARDTRAIN_GEMM_CACHE", "off", 1);
  CHECK(shardtrain::gemm_cache_path(m, 1).empty());
  if (before)
    ::setenv("SHARDTRAIN_GEMM_CACHE", saved.c_str(), 1);
  else
    ::unsetenv("SHARDTRAIN_GEMM_CACHE");
  std::filesystem::remove_all(dir);
}
