// gpu-check's records and each stage's closing computation: what a stage's tools wrote (run
// summaries, step logs, the test binary's JUnit file, the bundle's manifest) read through the
// project's typed readers into the stage's "result" (docs/PERFORMANCE.md "gpu-check" has every
// key). A computation that judges its figures returns a failure line beside them, so the figures
// are written even when the stage fails; unreadable input throws (UsageError / IoError naming the
// file), and the runner records the stage failed with that line.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/deviceproof/bundle_manifest.hpp"
#include "shardtrain/equiv/equivalence.hpp"

namespace shardtrain::deviceproof {

enum class StageStatus { kPass, kFail, kTimeout, kSkipped, kInterrupted };
inline constexpr std::pair<const char*, StageStatus> kStageStatusNames[] = {
    {"pass", StageStatus::kPass},       {"fail", StageStatus::kFail},
    {"timeout", StageStatus::kTimeout}, {"skipped", StageStatus::kSkipped},
    {"interrupted", StageStatus::kInterrupted}};
const char* status_name(StageStatus s);  // by kStageStatusNames

// <stage>.json: {stage, status, seconds, limit_s, exit_code, reason, log, result}.
struct StageRecord {
  std::string stage;
  StageStatus status = StageStatus::kPass;
  double seconds = 0;
  int limit_s = 0;
  int exit_code = 0;
  std::string reason, log;
  nlohmann::json result = nullptr;  // null: the stage computed none
  // The keys once: the summary's part of a stage, then the rest of <stage>.json.
  static auto summary_fields() {
    using namespace json_fields;
    return std::tuple{key("stage", &StageRecord::stage), key("status", &StageRecord::status, names(kStageStatusNames)),
                      key("seconds", &StageRecord::seconds), key("reason", &StageRecord::reason)};
  }
  static auto fields() {
    using namespace json_fields;
    return std::tuple_cat(summary_fields(), std::tuple{key("limit_s", &StageRecord::limit_s), key("exit_code", &StageRecord::exit_code),
                                                       key("log", &StageRecord::log), key("result", &StageRecord::result)});
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
};
// summary.json: {stages: [{stage, status, seconds, reason}...], dry_run, bundle (null: none)}.
nlohmann::json summary_json(const std::vector<StageRecord>& stages, bool dry, const std::string& bundle);

// A stage's figures, and why they fail it ("" when they do not).
struct StageResult {
  nlohmann::json result = nlohmann::json::object();
  std::string failure;
};

// gpu_tests: the exit codes of shardtrain_tests [gpu] (77: skipped, no device) and [nccl], and
// each case of the JUnit file (when there is one) failed or not. Fails when [nccl] failed, when
// [gpu] failed (dry run: when it did not skip with 77).
StageResult gpu_tests_result(const std::string& junit_path, int gpu_rc, int nccl_rc, bool dry);
// The JUnit file's test cases: [{name, failed}] (a <failure> or <error> inside the case).
nlohmann::json junit_cases(const std::string& xml);

// An equivalence stage: equiv-check's report as its JSON; fails on DIFFERENT, or on any verdict
// but `expected` when one is given ("verdict WITHIN, expected BITWISE").
StageResult equivalence_result(const equiv::EquivReport& report,
                               std::optional<equiv::Verdict> expected = std::nullopt);

// resume_cross_device: the verdicts of device->cpu and cpu->device resumes, and the final loss of
// the low-precision checkpoint resumed on the cpu (its run summary). Fails on a DIFFERENT one.
StageResult resume_result(const equiv::EquivReport& dev_cpu, const equiv::EquivReport& cpu_dev,
                          const std::string& low_cpu_summary);

// bf16_vs_fp32: RUNS/fp32 and RUNS/low, step losses compared step by step (relative to fp32) after
// `warmup`, and their hold-out losses. Fails unless every loss after warm-up is within 2% and
// the hold-out within 1%.
StageResult bf16_vs_fp32_result(const std::string& runs, int warmup, const std::string& corpus);

// gpt2_124m: the run's throughput and MFU against the measured and the datasheet peak, with FLOPs
// per token from 6N + 12LTC (independently of the trainer's).
StageResult gpt2_result(const std::string& summary_path);

// cpu_scaling: scale-bench run's points SERIES/w<W>/summary.json: tokens/s, speedup and
// efficiency against the first point, oversubscribed beyond `cpus`. Fails unless every point
// wrote its summary.
StageResult cpu_scaling_result(const std::string& series, const std::vector<int>& workers, int scale_bench_rc,
                               int cpus);

// build (a CUDA build): the configure log says the CUDA backend and the NCCL transport ON. Fails
// without the CUDA backend.
StageResult build_result(const std::string& configure_log_text);

// The build stage from the bundle: the files checked, the mismatches, the compiled paths linked to
// the bundle's copies, the device libraries `launch --report` listed. Fails on a mismatch, and
// (not a dry run) unless the report says every device library was found.
StageResult bundle_result(const std::string& bundle_dir, const BundleManifest& manifest,
                          const std::vector<std::string>& mismatches, const std::vector<std::string>& linked,
                          const std::string& launch_report, bool dry);

}  // namespace shardtrain::deviceproof
