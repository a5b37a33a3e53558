// gpu-check (deviceproof/): the plan and its budget rule, --part and --only, each stage's result
// from small files written here as the tools would, the bundle manifest check, and the time limit
// that ends a sleeping child's whole process group.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/deviceproof/gpu_check_plan.hpp"
#include "shardtrain/deviceproof/gpu_check_results.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::deviceproof;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names(const std::vector<StagePlan>& stages) {
  std::vector<std::string> out;
  for (const auto& s : stages) out.push_back(s.name);
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// A step log of these losses, one line a step, as ddp-train writes its loss.
void write_steps(const std::string& path, const std::vector<double>& losses) {
  std::string text;
  for (std::size_t i = 0; i < losses.size(); ++i)
    text += nlohmann::json{{"step", i}, {"loss", losses[i]}}.dump() + "\n";
  write_text(path, text);
}

// A run summary with every field (the rest at their defaults).
void write_summary(const std::string& path, const RunSummary& s) {
  fs::create_directories(fs::path(path).parent_path());
  write_json_file(path, json_fields::write(s));
}

equiv::EquivReport compare_logs(const std::string& dir, const std::vector<double>& a, const std::vector<double>& b,
                                double rtol) {
  write_steps(dir + "/a.jsonl", a);
  write_steps(dir + "/b.jsonl", b);
  equiv::EquivOptions o;
  o.a = dir + "/a.jsonl", o.b = dir + "/b.jsonl", o.tolerance.rtol = rtol;
  return equiv::compare_files(o);
}

}  // namespace

TEST_CASE("gpu-check plan: eleven stages in order, two parts, the bundle's build limit", "[unit][gpu_check]") {
  const auto plan = gpu_check_plan(false);
  CHECK(names(plan) == std::vector<std::string>{"env", "build", "data", "gpu_tests", "cpu_gpu_equivalence",
                                                 "shared_gpu_2rank", "deterministic_bitwise", "resume_cross_device",
                                                 "bf16_vs_fp32", "gpt2_124m", "cpu_scaling"});
  CHECK(names(select_stages(plan, Part::kOne, {})) ==
        std::vector<std::string>{"env", "build", "data", "gpu_tests", "cpu_gpu_equivalence", "shared_gpu_2rank",
                                 "deterministic_bitwise", "resume_cross_device"});
  CHECK(names(select_stages(plan, Part::kTwo, {})) ==
        std::vector<std::string>{"env", "data", "bf16_vs_fp32", "gpt2_124m", "cpu_scaling"});
  CHECK(select_stages(plan, Part::kAll, {}).size() == 11);
  CHECK(plan[1].limit_s == 300);
  CHECK(gpu_check_plan(true)[1].limit_s == 60);
  // The worst case from the bundle (480 s): every stage takes its whole limit. The budget rule then
  // skips the stages that no longer fit, and later shorter ones still run.
  std::vector<std::string> skipped;
  double used = 0;
  for (const auto& s : select_stages(gpu_check_plan(true), Part::kOne, {})) {
    if (fits_budget(used, s.limit_s, 480)) used += s.limit_s;
    else skipped.push_back(s.name);
  }
  CHECK(skipped == std::vector<std::string>{"deterministic_bitwise", "resume_cross_device"});
  CHECK(used == 440);
}

TEST_CASE("gpu-check --part: 1, 2 or all, anything else a usage error", "[unit][gpu_check]") {
  CHECK(parse_part("1") == Part::kOne);
  CHECK(parse_part("2") == Part::kTwo);
  CHECK(parse_part("all") == Part::kAll);
  CHECK_THROWS_WITH(parse_part("3"), Catch::Contains("--part must be 1, 2 or all (got '3')"));
  CHECK_THROWS_AS(parse_part(""), UsageError);
}

TEST_CASE("gpu-check --only: the stages named in plan order, whatever the part, unknown names refused",
          "[unit][gpu_check]") {
  const auto plan = gpu_check_plan(false);
  const auto only = parse_only("gpu_tests,env,cpu_scaling", plan);
  CHECK(names(select_stages(plan, Part::kOne, only)) ==
        std::vector<std::string>{"env", "gpu_tests", "cpu_scaling"});
  CHECK_THROWS_WITH(parse_only("env,gpu_test", plan), Catch::Contains("no stage 'gpu_test'"));
  CHECK_THROWS_AS(parse_only(",", plan), UsageError);
}

TEST_CASE("gpu-check budget rule: a stage runs only when its whole limit still fits", "[unit][gpu_check]") {
  CHECK(fits_budget(0, 300, 540));
  CHECK(fits_budget(240, 300, 540));   // exactly at the budget
  CHECK_FALSE(fits_budget(241, 300, 540));
  CHECK_FALSE(fits_budget(0, 600, 540));
  const auto text = plan_text(gpu_check_plan(false), "all", true, "/tmp/x");
  std::size_t lines = 0;
  for (std::size_t at = text.find(" limit "); at != std::string::npos; at = text.find(" limit ", at + 1)) ++lines;
  CHECK(lines == 11);
  CHECK(text.find("dry run on the CPU") != std::string::npos);
  CHECK(gpu_check_sizes(true, 16).scale_workers == std::vector<int>{1, 2});
  CHECK(gpu_check_sizes(false, 8).gpt2.back() == "8");
}

TEST_CASE("gpu-check gpu_tests: exit 77 is a pass only in the dry run, JUnit cases read", "[unit][gpu_check]") {
  const std::string dir = test::temp_dir("gpu_check_junit");
  const std::string junit = dir + "/gpu.xml";
  write_text(junit,
             "<?xml version=\"1.0\"?>\n<testsuites><testsuite name=\"t\">\n"
             "  <testcase classname=\"x\" name=\"matmul vs cpu\" time=\"0.1\"/>\n"
             "  <testcase classname=\"x\" name=\"fused attention\" time=\"0.1\">\n"
             "    <failure message=\"no\">bad</failure>\n  </testcase>\n"
             "  <testcase classname=\"x\" name=\"bf16\" time=\"0.1\">\n  </testcase>\n"
             "</testsuite></testsuites>\n");
  auto r = gpu_tests_result(junit, 1, 0, false);
  CHECK(r.failure == "shardtrain_tests [gpu] exited 1");
  REQUIRE(r.result["cases"].size() == 3);
  CHECK(r.result["cases"][0] == nlohmann::json{{"name", "matmul vs cpu"}, {"failed", false}});
  CHECK(r.result["cases"][1]["failed"] == true);
  CHECK(r.result["cases"][2]["failed"] == false);
  CHECK(gpu_tests_result(dir + "/none.xml", 77, 0, true).failure.empty());
  CHECK(gpu_tests_result(dir + "/none.xml", 77, 0, true).result["skipped_no_device"] == true);
  CHECK(gpu_tests_result(dir + "/none.xml", 0, 0, true).failure.find("not 77") != std::string::npos);
  CHECK(gpu_tests_result(dir + "/none.xml", 0, 3, false).failure == "shardtrain_tests [nccl] exited 3");
  CHECK(gpu_tests_result(dir + "/none.xml", 0, 0, false).failure.empty());
}

TEST_CASE("gpu-check equivalence stages: DIFFERENT fails, and deterministic_bitwise wants BITWISE",
          "[unit][gpu_check]") {
  const std::string dir = test::temp_dir("gpu_check_equiv");
  const auto same = compare_logs(dir + "/same", {2.0, 1.5, 1.2}, {2.0, 1.5, 1.2}, 1e-3);
  CHECK(equivalence_result(same, equiv::Verdict::kBitwise).failure.empty());
  CHECK(equivalence_result(same).result["verdict"] == "BITWISE");
  const auto close = compare_logs(dir + "/close", {2.0, 1.5, 1.2001}, {2.0, 1.5, 1.2}, 1e-3);
  CHECK(equivalence_result(close).failure.empty());
  CHECK(equivalence_result(close, equiv::Verdict::kBitwise).failure == "verdict WITHIN, expected BITWISE");
  const auto far = compare_logs(dir + "/far", {2.0, 1.5, 1.4}, {2.0, 1.5, 1.2}, 1e-3);
  CHECK(equivalence_result(far).failure.find("DIFFERENT") != std::string::npos);
}

TEST_CASE("gpu-check resume_cross_device: both verdicts and the low-precision resume's final loss",
          "[unit][gpu_check]") {
  const std::string dir = test::temp_dir("gpu_check_resume");
  RunSummary low;
  low.final_loss = 3.25;
  write_summary(dir + "/low_cpu/summary.json", low);
  const auto ok = compare_logs(dir + "/ok", {2.0, 1.5}, {2.0, 1.5}, 1e-3);
  const auto bad = compare_logs(dir + "/bad", {2.0, 1.9}, {2.0, 1.5}, 1e-3);
  auto r = resume_result(ok, ok, dir + "/low_cpu/summary.json");
  CHECK(r.failure.empty());
  CHECK(r.result == nlohmann::json{{"dev_cpu", "BITWISE"}, {"cpu_dev", "BITWISE"},
                                   {"low_precision_checkpoint_resumed_on_cpu", 3.25}});
  CHECK(resume_result(ok, bad, dir + "/low_cpu/summary.json").failure.find("DIFFERENT") != std::string::npos);
  CHECK_THROWS_AS(resume_result(ok, ok, dir + "/missing/summary.json"), Error);
}

TEST_CASE("gpu-check bf16_vs_fp32: losses after warm-up within 2%, hold-out within 1%", "[unit][gpu_check]") {
  const std::string dir = test::temp_dir("gpu_check_prec");
  auto summary = [&](const std::string& run, Precision p, double holdout) {
    RunSummary s;
    s.precision = p;
    s.throughput_tokens_per_s = 1000;
    s.eval = HoldoutLoss{holdout, 100, {}};
    write_summary(dir + "/" + run + "/summary.json", s);
  };
  summary("fp32", Precision::kFp32, 2.0);
  summary("low", Precision::kBf16, 2.01);
  // Step 0 is 50% off but inside the warm-up of 1; after it, 1% at worst (step 2).
  write_steps(dir + "/fp32/steps.rank0.jsonl", {4.0, 3.0, 2.0});
  write_steps(dir + "/low/steps.rank0.jsonl", {6.0, 3.0, 2.02});
  auto r = bf16_vs_fp32_result(dir, 1, "fortunes.h5");
  CHECK(r.failure.empty());
  CHECK(r.result["worst_step"] == 2);
  CHECK(r.result["max_rel_loss_diff_after_warmup"].get<double>() == Approx(0.01));
  CHECK(r.result["holdout_rel_diff"].get<double>() == Approx(0.005));
  CHECK(r.result["precision"] == nlohmann::json{"fp32", "bf16"});
  summary("low", Precision::kBf16, 2.1);  // hold-out 5% off
  r = bf16_vs_fp32_result(dir, 1, "fortunes.h5");
  CHECK(r.result["holdout_within_1pct"] == false);
  CHECK(r.failure.find("hold-out") != std::string::npos);
  write_steps(dir + "/low/steps.rank0.jsonl", {4.0, 3.0});  // a step short
  CHECK_THROWS_WITH(bf16_vs_fp32_result(dir, 1, "x"), Catch::Contains("expected the same"));
}

TEST_CASE("gpu-check gpt2_124m: FLOPs per token from 6N + 12LTC, MFU against both peaks", "[unit][gpu_check]") {
  const std::string dir = test::temp_dir("gpu_check_gpt2");
  RunSummary s;
  s.config = {{"model", {{"n_layer", 12}, {"d_model", 768}, {"seq_len", 1024}, {"vocab", 50304}}}};
  s.parameters = 124e6;
  s.throughput_tokens_per_s = 100000;
  s.peak_flops_per_rank = 1e15;
  s.peak_flops_datasheet_per_rank = 2e15;
  write_summary(dir + "/summary.json", s);
  const auto r = gpt2_result(dir + "/summary.json");
  const double flops = 6 * 124e6 + 12.0 * 12 * 1024 * 768;
  CHECK(r.result["flops_per_token_6N_12LTC"].get<double>() == flops);
  CHECK(r.result["mfu_vs_measured_peak"].get<double>() == Approx(1e5 * flops / 1e15));
  CHECK(r.result["mfu_vs_datasheet_peak"].get<double>() == Approx(1e5 * flops / 2e15));
  s.peak_flops_datasheet_per_rank.reset();
  write_summary(dir + "/summary.json", s);
  CHECK(gpt2_result(dir + "/summary.json").result["mfu_vs_datasheet_peak"].is_null());
}

TEST_CASE("gpu-check cpu_scaling: speedup and efficiency against the first point, a missing point fails",
          "[unit][gpu_check]") {
  const std::string dir = test::temp_dir("gpu_check_scaling");
  RunSummary s;
  s.throughput_tokens_per_s = 100;
  write_summary(dir + "/w1/summary.json", s);
  s.throughput_tokens_per_s = 150;
  write_summary(dir + "/w2/summary.json", s);
  auto r = cpu_scaling_result(dir, {1, 2}, 0, 1);
  CHECK(r.failure.empty());
  REQUIRE(r.result["table"].size() == 2);
  CHECK(r.result["table"][1]["speedup"].get<double>() == Approx(1.5));
  CHECK(r.result["table"][1]["efficiency"].get<double>() == Approx(0.75));
  CHECK(r.result["table"][1]["oversubscribed"] == true);
  CHECK(r.result["report_json"].is_null());
  r = cpu_scaling_result(dir, {1, 2, 4}, 1, 16);
  CHECK(r.failure == "points at workers [1,2], expected [1,2,4] (scale-bench exit 1)");
}

TEST_CASE("gpu-check build and bundle: the configure log, every manifest file by sha256 and link",
          "[unit][gpu_check]") {
  CHECK(build_result("-- shardtrain: CUDA backend ON (nvcc 13)\n-- NCCL transport ON\n").failure.empty());
  CHECK(build_result("-- shardtrain: CUDA backend ON\n").result["nccl_on"] == false);
  CHECK_FALSE(build_result("-- shardtrain: CUDA backend OFF\n").failure.empty());

  const std::string b = test::temp_dir("gpu_check_bundle");
  write_text(b + "/data/fortunes.h5", "corpus");
  fs::create_directories(b + "/bin");
  fs::create_symlink("orterun", b + "/bin/mpirun");
  const std::string digest = to_hex(sha256("corpus", 6));
  BundleManifest m;  // written by the manifest's own writer
  m.code_version = "v1", m.compiled_testdata = "/x/testdata", m.compiled_bin = "/x/bin", m.compiled_source = "/x";
  m.files.resize(2);
  m.files[0].path = "bin/mpirun", m.files[0].link = "orterun";
  m.files[1].path = "data/fortunes.h5", m.files[1].sha256 = digest, m.files[1].bytes = 6, m.files[1].mode = "644";
  write_json_file(b + "/manifest.json", m.to_json());
  const auto manifest = read_bundle_manifest(b + "/manifest.json");
  CHECK(manifest.compiled_bin == "/x/bin");
  CHECK(bundle_mismatches(b, manifest).empty());
  const std::string report = "  libcublas.so.13 -> /usr/lib/libcublas.so.13\nall 3 device libraries found\n";
  auto r = bundle_result(b, manifest, {}, {}, report, false);
  CHECK(r.failure.empty());
  CHECK(r.result["files"] == 2);
  CHECK(r.result["device_libraries"] == nlohmann::json{"libcublas.so.13 -> /usr/lib/libcublas.so.13"});
  CHECK_FALSE(bundle_result(b, manifest, {}, {}, "libcublas.so.13 not found\n", false).failure.empty());
  CHECK(bundle_result(b, manifest, {}, {}, "libcublas.so.13 not found\n", true).failure.empty());  // dry run

  write_text(b + "/data/fortunes.h5", "corpusx");  // one file altered, one link retargeted
  fs::remove(b + "/bin/mpirun");
  fs::create_symlink("other", b + "/bin/mpirun");
  const auto bad = bundle_mismatches(b, manifest);
  CHECK(bad == std::vector<std::string>{"bin/mpirun", "data/fortunes.h5"});
  CHECK(bundle_result(b, manifest, bad, {}, report, false).failure.find("2 of 2 files differ") != std::string::npos);
  nlohmann::json partial = m.to_json();
  partial["compiled_paths"].erase("testdata");
  write_json_file(b + "/manifest.json", partial);
  CHECK_THROWS_WITH(read_bundle_manifest(b + "/manifest.json"), Catch::Contains("/compiled_paths/testdata"));
}

TEST_CASE("gpu-check records: stage and summary JSON keep their keys", "[unit][gpu_check]") {
  StageRecord r;
  r.stage = "env", r.status = StageStatus::kSkipped, r.limit_s = 20, r.reason = "part budget";
  const auto j = r.to_json();
  for (const char* k : {"stage", "status", "seconds", "limit_s", "exit_code", "reason", "log", "result"})
    CHECK(j.contains(k));
  CHECK(j["status"] == "skipped");
  const auto s = summary_json({r}, true, "");
  CHECK(s["bundle"].is_null());
  CHECK(s["dry_run"] == true);
  CHECK(s["stages"][0] == nlohmann::json{{"stage", "env"}, {"status", "skipped"}, {"seconds", 0.0}, {"reason", "part budget"}});
}

TEST_CASE("run_child_limited: the limit ends a sleeping child and its whole process group", "[unit][gpu_check]") {
  const std::string dir = test::temp_dir("gpu_check_limit");
  const std::string log = dir + "/log";
  const auto t0 = std::chrono::steady_clock::now();
  // The shell starts a background sleeper (a grandchild, in the same group) and waits on another.
  const auto r = run_child_limited({"sh", "-c", "echo started; sleep 30 & echo $! > " + dir + "/pid; sleep 30"}, log,
                                   0.5, {}, 1.0);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.timed_out);
  CHECK_FALSE(r.stopped);
  CHECK(took < 5);
  std::ifstream pid_in(dir + "/pid");
  int pid = 0;
  pid_in >> pid;
  REQUIRE(pid > 0);
  // The grandchild is gone too (once init has reaped it: a zombie still answers kill 0).
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i, usleep(20000)) gone = ::kill(pid, 0) != 0;
  CHECK(gone);
  std::ifstream in(log);
  std::string first;
  std::getline(in, first);
  CHECK(first == "started");

  const auto ok = run_child_limited({"sh", "-c", "exit 3"}, log, 10);
  CHECK(ok.status == 3);
  CHECK_FALSE(ok.timed_out);
  bool asked = false;
  const auto stopped = run_child_limited({"sleep", "30"}, log, 60, [&] { return asked = true; }, 1.0);
  CHECK(stopped.stopped);
  CHECK(asked);
}
