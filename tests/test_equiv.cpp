// equiv-check tests: ULP distance on hand-picked pairs, the tolerance rule, parameter-file and
// step-log comparisons (BITWISE, WITHIN, DIFFERENT, structural differences, unusable input),
// checkpoints in two layouts, and the exit codes and JSON of the tool binary.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "shardtrain/equiv/equivalence.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/h5file.hpp"
#include "test_ckpt_support.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::equiv;

namespace {

void write_params(const std::string& path, const std::vector<std::pair<std::string, std::vector<float>>>& tensors,
                  const std::vector<std::int64_t>& dims2 = {}) {
  H5File f(path, H5File::Mode::kCreate);
  for (const auto& [name, values] : tensors) {
    std::vector<std::int64_t> dims = dims2.empty() ? std::vector<std::int64_t>{std::int64_t(values.size())} : dims2;
    f.write_floats(name, values, dims);
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

int run_tool(const std::string& args, std::string* out = nullptr) {
  const std::string dir = test::temp_dir("equiv-out");
  const std::string cmd = test::tool_path("equiv-check") + " " + args + " > " + dir + "/out.txt 2> " + dir + "/err.txt";
  const int status = std::system(cmd.c_str());
  if (out) {
    std::ifstream in(dir + "/out.txt");
    *out = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::vector<float> kW = {1.0f, -2.5f, 0.0f, 3.25f, 1e-3f, -7.0f};
const std::vector<float> kB = {0.5f, 0.25f};

}  // namespace

TEST_CASE("equiv: ULP distance on hand-picked float pairs", "[equiv]") {
  CHECK(ulp_distance(0.0f, -0.0f) == 0);
  CHECK(ulp_distance(1.0f, 1.0f) == 0);
  CHECK(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(ulp_distance(1.0f, std::nextafter(1.0f, 0.0f)) == 1);
  CHECK(ulp_distance(std::nextafter(1.0f, 0.0f), std::nextafter(1.0f, 2.0f)) == 2);
  CHECK(ulp_distance(-1.0f, std::nextafter(-1.0f, -2.0f)) == 1);
  // Opposite signs: the distances to zero add up.
  const float tiny = std::numeric_limits<float>::denorm_min();
  CHECK(ulp_distance(tiny, -tiny) == 2);
  CHECK(ulp_distance(tiny, 0.0f) == 1);
  CHECK(ulp_distance(-tiny, 0.0f) == 1);
  CHECK(ulp_distance(1.0f, -1.0f) == 2ull * 0x3f800000ull);
  CHECK(ulp_distance(-1.0f, 1.0f) == ulp_distance(1.0f, -1.0f));
  CHECK(ulp_distance(FLT_MAX, INFINITY) == 1);
  CHECK(ulp_distance(NAN, 1.0f) == kInfiniteUlp);
  CHECK(ulp_distance(0.0f, NAN) == kInfiniteUlp);
  CHECK(ulp_distance(NAN, NAN) == 0);
  CHECK(ulp_distance(1.0, std::nextafter(1.0, 2.0)) == 1);
  CHECK(ulp_distance(-0.0, 0.0) == 0);
  CHECK(ulp_distance(-DBL_MAX, DBL_MAX) == 2ull * 0x7fefffffffffffffull);
}

TEST_CASE("equiv: the tolerance rule per element", "[equiv]") {
  const std::vector<float> b = {1.0f, 2.0f, -4.0f, 0.0f};
  auto a = b;
  CHECK(compare_values("t", a.data(), b.data(), 4, {}).verdict == Verdict::kBitwise);
  a[3] = -0.0f;  // equal as numbers, different bits
  auto d = compare_values("t", a.data(), b.data(), 4, {});
  CHECK(d.verdict == Verdict::kWithin);
  CHECK(d.bits_differ == 1);
  CHECK(d.max_ulp == 0);
  a[1] = std::nextafter(2.0f, 3.0f);  // 1 ulp = 2^-22 at 2.0
  d = compare_values("t", a.data(), b.data(), 4, {});
  CHECK(d.verdict == Verdict::kDifferent);
  CHECK(d.outside == 1);
  CHECK(d.first_outside == 1);
  CHECK(d.max_ulp == 1);
  CHECK(d.max_abs == Approx(std::ldexp(1.0, -22)));
  CHECK(d.max_rel == Approx(std::ldexp(1.0, -23)));
  CHECK(compare_values("t", a.data(), b.data(), 4, {0, 0, 1}).verdict == Verdict::kWithin);          // --ulps 1
  CHECK(compare_values("t", a.data(), b.data(), 4, {1e-6, 0, 0}).verdict == Verdict::kWithin);       // rtol*|b| = 2e-6
  CHECK(compare_values("t", a.data(), b.data(), 4, {1e-8, 0, 0}).verdict == Verdict::kDifferent);
  CHECK(compare_values("t", a.data(), b.data(), 4, {0, 1e-6, 0}).verdict == Verdict::kWithin);       // atol
  a[0] = NAN;
  d = compare_values("t", a.data(), b.data(), 4, {1, 1, 1000});
  CHECK(d.verdict == Verdict::kDifferent);  // NaN against a number fails any tolerance
  CHECK(d.max_ulp == kInfiniteUlp);
  CHECK(std::isinf(d.max_abs));
  std::vector<float> n1 = {NAN}, n2 = {NAN};
  CHECK(compare_values("t", n1.data(), n2.data(), 1, {}).verdict != Verdict::kDifferent);
  // Relative difference against a zero reference is infinite, yet atol can accept it.
  std::vector<float> z = {0.0f}, e = {1e-7f};
  d = compare_values("t", e.data(), z.data(), 1, {0, 1e-6, 0});
  CHECK(std::isinf(d.max_rel));
  CHECK(d.verdict == Verdict::kWithin);
}

TEST_CASE("equiv: parameter files", "[equiv]") {
  const std::string dir = test::temp_dir("equiv");
  const std::string a = dir + "/a.h5", b = dir + "/b.h5";
  write_params(b, {{"params/h.0.attn.qkv.weight", kW}, {"params/h.0.attn.qkv.bias", kB}, {"params/wte", kB}});
  EquivOptions o;
  o.a = a;
  o.b = b;

  SECTION("identical: BITWISE, rows sorted by name") {
    write_params(a, {{"params/wte", kB}, {"params/h.0.attn.qkv.weight", kW}, {"params/h.0.attn.qkv.bias", kB}});
    const auto r = compare_files(o);
    CHECK(r.verdict == Verdict::kBitwise);
    REQUIRE(r.tensors.size() == 3);
    CHECK(r.tensors[0].name == "params/h.0.attn.qkv.bias");
    CHECK(r.tensors[2].name == "params/wte");
    CHECK(r.tensors[1].count == kW.size());
    CHECK_THAT(r.table(), Catch::EndsWith("verdict: BITWISE\n"));
    o.group_a = o.group_b = "params";
    const auto g = compare_files(o);
    CHECK(g.tensors[0].name == "h.0.attn.qkv.bias");
  }
  SECTION("one element one ulp off: DIFFERENT by default, WITHIN with --ulps 1") {
    auto w = kW;
    w[3] = std::nextafter(w[3], 10.0f);
    write_params(a, {{"params/h.0.attn.qkv.weight", w}, {"params/h.0.attn.qkv.bias", kB}, {"params/wte", kB}});
    auto r = compare_files(o);
    CHECK(r.verdict == Verdict::kDifferent);
    CHECK(r.tensors[1].first_outside == 3);
    CHECK(r.tensors[1].max_ulp == 1);
    o.tolerance.ulps = 1;
    r = compare_files(o);
    CHECK(r.verdict == Verdict::kWithin);
    CHECK_THAT(r.table(), Catch::EndsWith("verdict: WITHIN tolerance\n"));
    const auto j = r.to_json();
    CHECK(j["verdict"] == "WITHIN");
    CHECK(j["tensors"][1]["max_ulp"] == 1);
    CHECK(j["tensors"][0]["verdict"] == "BITWISE");
  }
  SECTION("a changed element: DIFFERENT, naming the tensor and index") {
    auto w = kW;
    w[5] = 7.0f;
    write_params(a, {{"params/h.0.attn.qkv.weight", w}, {"params/h.0.attn.qkv.bias", kB}, {"params/wte", kB}});
    o.tolerance = {1e-3, 1e-6, 4};
    const auto r = compare_files(o);
    CHECK(r.verdict == Verdict::kDifferent);
    CHECK(r.tensors[1].verdict == Verdict::kDifferent);
    CHECK(r.tensors[1].outside == 1);
    CHECK(r.tensors[1].first_outside == 5);
    CHECK(r.tensors[1].max_abs == 14.0);
    CHECK(r.tensors[0].verdict == Verdict::kBitwise);
  }
  SECTION("a tensor on one side only, or of another shape: DIFFERENT") {
    write_params(a, {{"params/h.0.attn.qkv.weight", kW}, {"params/h.0.attn.qkv.bias", kB}, {"params/extra", kB}});
    auto r = compare_files(o);
    CHECK(r.verdict == Verdict::kDifferent);
    REQUIRE(r.tensors.size() == 4);
    CHECK(r.tensors[0].name == "params/extra");
    CHECK(r.tensors[0].problem == "only in A");
    CHECK(r.tensors[3].name == "params/wte");
    CHECK(r.tensors[3].problem == "only in B");
    CHECK(r.tensors[1].verdict == Verdict::kBitwise);
  }
  SECTION("shape mismatch is DIFFERENT, not unusable") {
    {
      H5File f(a, H5File::Mode::kCreate);
      f.write_floats("params/h.0.attn.qkv.weight", kW, {2, 3});
      f.write_floats("params/h.0.attn.qkv.bias", kB, {2});
      f.write_floats("params/wte", kB, {2});
    }
    const auto r = compare_files(o);
    CHECK(r.verdict == Verdict::kDifferent);
    CHECK(r.tensors[1].problem == "shape mismatch: (2,3) vs (6,)");
  }
  SECTION("top-level datasets against a group: --group-a / --group-b") {
    write_params(a, {{"h.0.attn.qkv.weight", kW}, {"h.0.attn.qkv.bias", kB}, {"wte", kB}});
    o.group_b = "params";
    CHECK(compare_files(o).verdict == Verdict::kBitwise);
  }
  SECTION("unusable input: UsageError") {
    write_params(a, {{"other/x", kB}});
    CHECK_THROWS_WITH(compare_files(o), Catch::Contains("no float dataset in common"));
    o.a = dir + "/missing.h5";
    CHECK_THROWS_WITH(compare_files(o), Catch::Contains("no such file"));
    write_text(dir + "/junk.h5", "not hdf5\n");
    o.a = dir + "/junk.h5";
    CHECK_THROWS_AS(compare_files(o), UsageError);
    o.a = a;
    o.group_a = o.group_b = "nope";
    CHECK_THROWS_WITH(compare_files(o), Catch::Contains("no group"));
    o.group_a = o.group_b = "";
    write_text(dir + "/x.txt", "");
    o.a = dir + "/x.txt";
    CHECK_THROWS_WITH(compare_files(o), Catch::Contains("--kind"));
  }
}

TEST_CASE("equiv: step logs", "[equiv]") {
  const std::string dir = test::temp_dir("equiv-steps");
  const std::string a = dir + "/a.jsonl", b = dir + "/b.jsonl";
  const std::string log =
      "{\"step\":0,\"loss\":5.6,\"rank\":0}\n{\"step\":1,\"loss\":5.25,\"rank\":0}\n\n{\"step\":2,\"loss\":4.875}\n";
  write_text(b, log);
  EquivOptions o;
  o.a = a;
  o.b = b;
  write_text(a, log);
  auto r = compare_files(o);
  CHECK(r.kind == InputKind::kStepLog);
  CHECK(r.verdict == Verdict::kBitwise);
  REQUIRE(r.tensors.size() == 1);
  CHECK(r.tensors[0].name == "loss");
  CHECK(r.tensors[0].count == 3);

  write_text(a, "{\"step\":0,\"loss\":5.6}\n{\"step\":1,\"loss\":5.2500001}\n{\"step\":2,\"loss\":4.875}\n");
  r = compare_files(o);
  CHECK(r.verdict == Verdict::kDifferent);
  CHECK(r.tensors[0].first_outside == 1);  // the step
  o.tolerance.rtol = 1e-7;
  CHECK(compare_files(o).verdict == Verdict::kWithin);

  write_text(a, "{\"step\":0,\"loss\":5.6}\n{\"step\":1,\"loss\":5.25}\n");
  o.tolerance = {};
  r = compare_files(o);
  CHECK(r.verdict == Verdict::kDifferent);  // step 2 only in B
  CHECK_THAT(r.tensors[0].problem, Catch::Contains("only in B: 1"));

  write_text(a, "{\"step\":0,\"loss\":5.6}\nnot json\n");
  CHECK_THROWS_WITH(compare_files(o), Catch::Contains("a.jsonl:2"));
  write_text(a, "{\"step\":7,\"loss\":1.0}\n");
  CHECK_THROWS_WITH(compare_files(o), Catch::Contains("no step in common"));
  write_text(a, "{\"other\":1}\n");
  CHECK_THROWS_WITH(compare_files(o), Catch::Contains("no line with"));
}

TEST_CASE("equiv-check: exit codes and JSON of the tool", "[equiv]") {
  const std::string dir = test::temp_dir("equiv-tool");
  const std::string a = dir + "/a.h5", b = dir + "/b.h5", c = dir + "/c.h5";
  write_params(a, {{"params/w", kW}});
  write_params(b, {{"params/w", kW}});
  auto w = kW;
  w[0] = std::nextafter(w[0], 2.0f);
  write_params(c, {{"params/w", w}});
  std::string out;
  CHECK(run_tool(a + " " + b, &out) == 0);
  CHECK_THAT(out, Catch::Contains("verdict: BITWISE"));
  CHECK(run_tool(c + " " + b, &out) == 1);
  CHECK_THAT(out, Catch::Contains("verdict: DIFFERENT"));
  CHECK(run_tool(c + " " + b + " --ulps 1 --json " + dir + "/r.json") == 0);
  {
    std::ifstream in(dir + "/r.json");
    const auto j = nlohmann::json::parse(in);
    CHECK(j["verdict"] == "WITHIN");
    CHECK(j["tensors"][0]["name"] == "params/w");
    CHECK(j["tolerance"]["ulps"] == 1);
  }
  CHECK(run_tool(c + " " + b + " --rtol 1e-6 --json -", &out) == 0);
  CHECK(nlohmann::json::parse(out)["verdict"] == "WITHIN");  // stdout is pure JSON
  CHECK(run_tool(dir + "/missing.h5 " + b) == 2);
  write_text(dir + "/junk.h5", "junk");
  CHECK(run_tool(dir + "/junk.h5 " + b) == 2);
  CHECK(run_tool(a + " " + b + " --group nothing") == 2);
  CHECK(run_tool(a + " " + b + " --rtol banana") == 2);
  CHECK(run_tool(a + " " + b + " --kind steps") == 2);  // HDF5 bytes are not JSONL
  CHECK(run_tool("--help") == 0);
}

// Checkpoints: the same logical state written in two layouts (spread over every rank; all of it by
// rank 0) is BITWISE whichever folder form names it (step_<N>, or the folder whose `latest` names
// it); one optimizer-moment element one ULP off is DIFFERENT naming that tensor alone (WITHIN at
// --ulps 1); a changed counter is DIFFERENT at any tolerance; a corrupt or missing checkpoint is
// unusable input.
TEST_CASE("equiv: checkpoints in any layout, parameters and moments", "[mpi][equiv]") {
  using namespace shardtrain::test::ckpt_fixture;
  const auto [rank, world, dir, comm] = mpi_case("equiv-ckpt");
  const ToyState state = make_state(3);
  save_state(dir + "/spread", state, 7, *comm);
  const auto whole = rank == 0 ? ck::spread_pieces(state.specs, state.pointers(), 1, 0) : std::vector<ck::PieceView>{};
  ck::save_checkpoint(dir + "/whole", make_manifest(7, world), state.specs, whole, *comm);
  ToyState moment_off = state, counter_off = state;
  const std::string moment = "optim.exp_avg_sq.h.0.attn.qkv.weight";
  for (std::size_t i = 0; i < state.specs.size(); ++i) {
    if (state.specs[i].name == moment) {
      float x;
      std::memcpy(&x, moment_off.data[i].data() + 4 * 17, 4);
      x = std::nextafter(x, 10.0f);
      std::memcpy(moment_off.data[i].data() + 4 * 17, &x, 4);
    }
    if (state.specs[i].name == "rng.counters") counter_off.data[i][8] ^= 1;  // element 1
  }
  save_state(dir + "/moment_off", moment_off, 7, *comm);
  save_state(dir + "/counter_off", counter_off, 7, *comm);
  if (rank == 0) {
    EquivOptions o;
    o.a = dir + "/spread/step_00000007";
    o.b = dir + "/whole";  // its `latest` names step_00000007
    auto r = compare_files(o);
    CHECK(r.kind == InputKind::kCheckpoint);
    CHECK(r.verdict == Verdict::kBitwise);
    CHECK(r.tensors.size() == state.specs.size());
    CHECK(r.checkpoint_b == dir + "/whole/step_00000007");
    CHECK(r.step_a == 7);
    CHECK(r.to_json()["checkpoint_b"] == dir + "/whole/step_00000007");
    CHECK_THAT(r.table(), Catch::EndsWith("verdict: BITWISE\n"));

    o.a = dir + "/moment_off";
    r = compare_files(o);
    CHECK(r.verdict == Verdict::kDifferent);
    int different = 0;
    for (const auto& t : r.tensors) {
      if (t.verdict == Verdict::kBitwise) continue;
      ++different;
      CHECK(t.name == moment);
      CHECK(t.first_outside == 17);
      CHECK(t.max_ulp == 1);
    }
    CHECK(different == 1);
    o.tolerance.ulps = 1;
    CHECK(compare_files(o).verdict == Verdict::kWithin);

    o.a = dir + "/counter_off";
    o.tolerance = {1.0, 1.0, 1000};  // no tolerance covers a changed counter
    r = compare_files(o);
    CHECK(r.verdict == Verdict::kDifferent);
    for (const auto& t : r.tensors)
      if (t.verdict != Verdict::kBitwise) {
        CHECK(t.name == "rng.counters");
        CHECK(t.dtype == "int64");
        CHECK(t.first_outside == 1);
      }

    // Unusable: a folder that is no checkpoint, a corrupt rank file (named), --kind params on a folder.
    o = EquivOptions{};
    o.a = dir;
    o.b = dir + "/whole";
    CHECK_THROWS_WITH(compare_files(o), Catch::Contains("neither a checkpoint") && Catch::Contains("step_<N>"));
    const std::string rank_file = dir + "/counter_off/step_00000007/" + ck::rank_file_name(0);
    flip_byte(rank_file, std::int64_t(std::filesystem::file_size(rank_file)) - 1);
    o.a = dir + "/counter_off";
    CHECK_THROWS_AS(compare_files(o), UsageError);
    CHECK_THROWS_WITH(compare_files(o), Catch::Contains("rank_00000.h5"));
    o.a = dir + "/spread";
    o.kind = InputKind::kParams;
    CHECK_THROWS_WITH(compare_files(o), Catch::Contains("is a folder"));
  }
  comm->barrier();
}
