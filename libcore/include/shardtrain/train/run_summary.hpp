// The run summary: what a training run reports when it ends, written by rank 0 to
// RUN_DIR/summary.json and returned by run_training. docs/FORMATS.md ("Run summary") has every
// field; the JSON keys below are those, each type's fields() lists them once and
// json_fields::write/read (base/json_record.hpp) walk that list both ways (scripts, Slurm jobs and
// docs read the file with jq and python, so a key is never renamed here). Units: seconds,
// tokens, FLOP and FLOP/s, bytes; fractions (mfu, efficiency) are plain ratios.
//
// Typed except one part held as the JSON it already is elsewhere: "config" (the run's
// configuration, the same object as every checkpoint manifest's "config", hashed into the config
// id).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/data/selection.hpp"
#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/telemetry/run_summary.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "shardtrain/telemetry/network_straggler.hpp"
#include "shardtrain/telemetry/straggler.hpp"
#include "shardtrain/train/evaluation.hpp"

namespace shardtrain {

// The summary's "mfu_peak" (docs/FORMATS.md, "Run summary: mfu and mfu_peak"): which peak MFU is
// over and whether the run beat it. The optional ones are null in JSON where unknown (a given
// peak, or a GPU run for shared_cores).
struct MfuPeak {
  std::string basis;   // for humans: "measured with all 2 ranks at once, on shared cores (...)"
  std::string source;  // "given" | "measured"
  int ranks_measured_at_once = 0;
  std::optional<bool> shared_cores;
  std::optional<int> max_ranks_per_host, host_cpus;
  double achieved_flops_per_rank = 0;  // FLOP/s
  bool peak_exceeded = false;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("basis", &MfuPeak::basis), key("source", &MfuPeak::source),
                      key("ranks_measured_at_once", &MfuPeak::ranks_measured_at_once),
                      key("shared_cores", &MfuPeak::shared_cores), key("max_ranks_per_host", &MfuPeak::max_ranks_per_host),
                      key("host_cpus", &MfuPeak::host_cpus), key("achieved_flops_per_rank", &MfuPeak::achieved_flops_per_rank),
                      key("peak_exceeded", &MfuPeak::peak_exceeded)};
  }
  bool operator==(const MfuPeak&) const = default;
};

// The machine rank 0 ran on ("host": {"hostname", "cpus"}), so a report can tell a run of more
// ranks than cores (ranks take turns on a core) from hardware scaling.
struct HostInfo {
  std::string hostname;
  int cpus = 0;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("hostname", &HostInfo::hostname), key("cpus", &HostInfo::cpus)};
  }
  bool operator==(const HostInfo&) const = default;
};

// --check-replicas ("replica_checks": {"every", "checks"}): a diverged replica stops the run with
// an error, so checks >= 1 in a summary means every one of them matched.
struct ReplicaChecks {
  int every = 0;
  std::int64_t checks = 0;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("every", &ReplicaChecks::every), key("checks", &ReplicaChecks::checks)};
  }
  bool operator==(const ReplicaChecks&) const = default;
};

// The summary's "startup": seconds from this launch to its first step on rank 0, and where they
// went (each phase as the trainer runs it; docs/FORMATS.md). Absent in summaries written before
// the field existed (optional when read).
struct StartupTimes {
  double before_job_s = 0;     // the process's start -> the job's set-up: loading the program, MPI_Init
  double setup_s = 0;          // the job: communicator, data, layout, backend, the model initialised
  double resume_s = 0;         // the checkpoint read back (about 0 for a fresh start)
  double loop_setup_s = 0;     // the GEMM library chosen, the matmul peak measured, the step log opened
  // The process's start (the kernel's start time) -> the first step begins: the phases' sum
  // ("to_first_step_s" in JSON, written for readers; reading derives it again).
  double to_first_step_s() const { return before_job_s + setup_s + resume_s + loop_setup_s; }
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("before_job_s", &StartupTimes::before_job_s), key("setup_s", &StartupTimes::setup_s),
                      key("resume_s", &StartupTimes::resume_s), key("loop_setup_s", &StartupTimes::loop_setup_s),
                      written("to_first_step_s", &StartupTimes::to_first_step_s)};
  }
  bool operator==(const StartupTimes&) const = default;
};

// The summary's "communication": the data-parallel group's accounting as CommStats writes it
// (comm/communicator.hpp: per operation calls, bytes, busy and CPU seconds; with levels, the
// intra- and inter-node split), plus "bare_allreduce_busbw_GBps" (the bare library all-reduce
// measured at start; W > 1 only) and "tp" (the tensor-parallel group's CommStats; TP runs only).
// Read by the step model's fit (calls and bytes per operation) and the scaling report (levels).
struct RunCommunication {
  CommStats dp;
  std::optional<double> bare_allreduce_busbw_GBps;
  std::optional<CommStats> tp;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{inlined(&RunCommunication::dp),
                      key("bare_allreduce_busbw_GBps", &RunCommunication::bare_allreduce_busbw_GBps, kOmittedWhenEmpty),
                      key("tp", &RunCommunication::tp, kOmittedWhenEmpty)};
  }
  bool operator==(const RunCommunication&) const = default;
};

struct RunSummary {
  std::string tool;          // "ddp-train" | "fsdp-train"
  RunIdentity identity;
  nlohmann::json config = nlohmann::json::object();  // see above
  data::DataSelectionInfo data;
  std::string backend, layout;  // the backend's and the strategy's describe()
  double parameters = 0;
  int world_size = 1;
  HostInfo host;
  // Every rank's host name, by world rank ("rank_hosts"), as RUN_DIR/hosts.json has it: which
  // ranks shared a node. Empty in summaries written before the field existed (optional when read).
  std::vector<std::string> rank_hosts;
  std::int64_t steps = 0;       // steps run by this launch
  std::int64_t first_step = 0;  // the step it started at (a resume's)
  bool stopped_by_signal = false;
  std::string checkpoint_dir;
  std::int64_t tokens = 0;      // trained by this launch, all ranks
  double train_seconds = 0, wall_seconds = 0;
  std::optional<StartupTimes> startup;  // null in older summaries
  double throughput_tokens_per_s = 0;  // at rank 0's median step after warm-up
  double median_step_s = 0;
  double flops_per_token = 0, peak_flops_per_rank = 0;
  double mfu = 0;               // at most 1
  MfuPeak mfu_peak;
  Precision precision = Precision::kFp32;  // "fp32" | "bf16"
  std::string device_name;                 // "" on the CPU
  std::optional<double> peak_flops_datasheet_per_rank, mfu_datasheet;  // null where the datasheet is unknown
  // CPU runs: the GEMM library chosen and why, with the measured rates (cpu_gemm.hpp's
  // gemm_choice_to_json); null on cuda, and in summaries written before the field existed (it is
  // optional when read).
  nlohmann::json gemm = nullptr;
  double first_loss = 0, final_loss = 0;
  PerRankTable per_rank_medians;
  int slowest_rank = 0;
  StragglerReport stragglers;
  // Hosts whose links carry far less than the others' (telemetry/network_straggler.hpp): a section
  // of its own, apart from the compute straggler scores above; absent in older summaries (empty).
  NetworkStragglerReport network_stragglers;
  double exposed_comm_fraction = 0;
  RunCommunication communication;
  MemoryReport memory_bytes_rank0;
  std::vector<MemoryReport> memory_bytes_by_rank;
  std::optional<HoldoutLoss> eval;  // null: no hold-out
  ReplicaChecks replica_checks;
  std::string step_log, params, summary;  // files: rank 0's step log, params.h5, summary.json
  // --baseline: the top-level "baseline", "speedup" and "scaling_efficiency" (absent without).
  std::optional<ScalingVsBaseline> scaling;

  // Every field is required (null where it says so) but those marked kMayBeAbsent (newer than the
  // format); a missing or mistyped one is a UsageError naming the file and the field by its JSON
  // pointer ("/mfu_peak/basis"). Written by json_fields::write, read by read_run_summary.
  static auto fields() {
    using namespace json_fields;
    using S = RunSummary;
    return std::tuple{
        key("tool", &S::tool), key("identity", &S::identity), key("config", &S::config, object), key("data", &S::data),
        key("backend", &S::backend), key("layout", &S::layout), key("parameters", &S::parameters),
        key("world_size", &S::world_size), key("host", &S::host), key("rank_hosts", &S::rank_hosts, kMayBeAbsent),
        key("steps", &S::steps), key("first_step", &S::first_step), key("stopped_by_signal", &S::stopped_by_signal),
        key("checkpoint_dir", &S::checkpoint_dir), key("tokens", &S::tokens), key("train_seconds", &S::train_seconds),
        key("wall_seconds", &S::wall_seconds), key("startup", &S::startup, kMayBeAbsent),
        key("throughput_tokens_per_s", &S::throughput_tokens_per_s), key("median_step_s", &S::median_step_s),
        key("flops_per_token", &S::flops_per_token), key("peak_flops_per_rank", &S::peak_flops_per_rank),
        key("mfu", &S::mfu), key("mfu_peak", &S::mfu_peak), key("precision", &S::precision, names(kPrecisionNames)),
        key("device_name", &S::device_name), key("peak_flops_datasheet_per_rank", &S::peak_flops_datasheet_per_rank),
        key("mfu_datasheet", &S::mfu_datasheet), key("gemm", &S::gemm, kMayBeAbsent), key("first_loss", &S::first_loss),
        key("final_loss", &S::final_loss), key("per_rank_medians", &S::per_rank_medians),
        key("slowest_rank", &S::slowest_rank), key("stragglers", &S::stragglers),
        key("network_stragglers", &S::network_stragglers, kMayBeAbsent),
        key("exposed_comm_fraction", &S::exposed_comm_fraction), key("communication", &S::communication),
        key("memory_bytes_rank0", &S::memory_bytes_rank0), key("memory_bytes_by_rank", &S::memory_bytes_by_rank),
        key("eval", &S::eval), key("replica_checks", &S::replica_checks), key("step_log", &S::step_log),
        key("params", &S::params), key("summary", &S::summary), inlined(&S::scaling)};  // --baseline's three keys
  }
  bool operator==(const RunSummary&) const = default;
};

// Reads a summary.json through JsonFile, the file's one reader: UsageError "PATH: WHAT has no
// field /mfu_peak/basis" naming the file and the field on a missing or mistyped one (IoError when
// it cannot be opened). `what` says what the file was given as ("the --baseline run summary").
RunSummary read_run_summary(const std::string& path, const std::string& what = "the run summary");

// --baseline: a 1-rank (or W_base-rank) run's summary through read_run_summary, before any
// training starts; UsageError naming the file when its throughput is not positive.
Baseline read_baseline(const std::string& path);

// The one-paragraph summary printed at the end of a run.
std::string summary_paragraph(const RunSummary& summary);

}  // namespace shardtrain
