#include "finish.hpp"

#include <mpi.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "shardtrain/base/host.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/process_stats.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/train/evaluation.hpp"
#include "straggler_watch.hpp"

namespace shardtrain {
namespace {

// What every rank measures after the loop (each part collective), for rank 0's summary.
struct RunMeasurements {
  std::vector<ColumnMedians> rank_medians;  // every rank's median of each step-log column
  double median_step_s = 0;                 // rank 0's median step after warm-up
  double throughput = 0;                    // tokens per second at that median
  CommStats comm_stats;                     // the data-parallel group's
  CommStats tp_comm_stats;                  // the tensor-parallel group's (TP > 1)
  double bare_busbw = 0;                    // bytes/s of the library all-reduce (yardstick group; the gradient size, at most 16 MiB)
  std::string params_path;
  MemoryReport memory;                      // this rank's peaks (strategy->memory_report())
  std::vector<MemoryReport> memory_by_rank; // every rank's peaks (ZeRO shards differ by rank through padding)
  StragglerReport stragglers;               // straggler scores of the whole run (telemetry/straggler.hpp)
  NetworkStragglerReport network_stragglers;  // hosts with slow links (telemetry/network_straggler.hpp)
};

std::string summary_path(const TrainOptions& o) { return o.run_dir + "/summary.json"; }

// --check-replicas: how often, and how many checks this run made (run_summary.hpp ReplicaChecks).
ReplicaChecks replica_checks_of(const TrainOptions& o, const std::vector<StepRecord>& records) {
  std::int64_t checks = 0;
  const int every = o.telemetry.check_replicas;
  if (every > 0)
    for (const auto& r : records) checks += (r.step + 1) % every == 0;
  return {every, checks};
}

// The median step time after warm-up (the first step pays for allocation and primitive creation).
double steady_median_step_s(const std::vector<StepRecord>& records) {
  std::vector<double> steady;
  for (std::size_t i = records.size() > 3 ? 1 : 0; i < records.size(); ++i) steady.push_back(records[i].step_s);
  return SeriesStats::of(steady).median;
}

// Collective: every rank's memory peaks (the per-category peaks, model state and total, the
// resident peak and baseline).
std::vector<MemoryReport> memory_by_rank(Communicator& comm, const MemoryReport& memory) {
  constexpr int kFields = kNumMemoryCategories + 4;
  std::vector<double> mine(memory.peak.begin(), memory.peak.end()), all(std::size_t(comm.size()) * kFields);
  mine.insert(mine.end(), {memory.model_state, memory.total, memory.resident_peak, memory.process_baseline});
  comm.all_gather(mine.data(), all.data(), kFields);
  std::vector<MemoryReport> by_rank(std::size_t(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    const double* f = all.data() + std::size_t(r) * kFields;
    MemoryReport& m = by_rank[std::size_t(r)];
    std::copy(f, f + kNumMemoryCategories, m.peak.begin());
    m.model_state = f[kNumMemoryCategories];
    m.total = f[kNumMemoryCategories + 1];
    m.resident_peak = f[kNumMemoryCategories + 2];
    m.process_baseline = f[kNumMemoryCategories + 3];
    m.formula_model_state = memory.formula_model_state;  // the same stage on every rank
    m.zero_stage = memory.zero_stage;
  }
  return by_rank;
}

RunMeasurements measure_run(Job& job, const LoopRecords& loop) {
  const auto& strategy = job.strategy;
  RunMeasurements m;
  m.rank_medians = gather_rank_medians(*job.comm, loop.records);
  m.stragglers = gather_straggler_report(job, loop.records);
  m.network_stragglers = gather_network_stragglers(job, loop.records);
  m.median_step_s = steady_median_step_s(loop.records);
  m.throughput = double(job.tokens_per_step()) / m.median_step_s;
  m.comm_stats = job.mesh.dp->stats();
  if (job.mesh.tp) m.tp_comm_stats = job.mesh.tp->stats();
  if (job.world > 1) {  // the library's own all-reduce as a yardstick, on a group of its own, freed right after
    CommOptions yardstick = comm_options_for(job.options, "yardstick");
    yardstick.all_reduce = AllReduceAlgorithm::kLibrary;
    m.bare_busbw = bare_allreduce_busbw(*make_mpi_communicator(MPI_COMM_WORLD, yardstick), strategy->registry().total());
  }
  m.params_path = job.options.run_dir + "/params.h5";
  write_parameters_file(*strategy, m.params_path);
  m.memory = strategy->memory_report();
  // The comm engines' scratch space (CommStats::scratch_bytes, about half the largest all-reduce):
  // host memory of the process that no strategy allocates, held from the first step's large
  // collectives to the end, so inside the peak of the sum as well.
  const double scratch = double(m.comm_stats.scratch_bytes) + double(m.tp_comm_stats.scratch_bytes);
  m.memory.peak[std::size_t(MemoryCategory::kCommunication)] += scratch;
  m.memory.total += scratch;
  m.memory.resident_peak = process_memory().resident_peak_bytes;  // after params.h5: the run's whole peak
  m.memory.process_baseline = job.resident_before_state;
  m.memory_by_rank = memory_by_rank(*job.comm, m.memory);
  return m;
}

RunSummary summary_of(const Job& job, const ResumePoint& start, const LoopRecords& loop, const StepLog& step_log,
                      const MfuBasis& mfu, const RunMeasurements& m, double wall_seconds) {
  const TrainOptions& o = job.options;
  const auto& records = loop.records;
  RunSummary s;
  s.tool = o.tool;
  s.identity = job.identity;
  s.config = job.run_config;
  s.data = job.data.describe();
  s.backend = job.backend->describe();
  s.layout = job.strategy->describe();
  s.parameters = double(job.model.parameter_count());
  s.world_size = job.world;
  s.host = {host_name(), host_cpus()};
  s.rank_hosts = job.rank_hosts;
  s.steps = std::int64_t(records.size());
  s.first_step = start.step;
  s.stopped_by_signal = loop.stopped_by_signal;
  s.checkpoint_dir = job.ckpt_dir;
  s.tokens = job.tokens_per_step() * std::int64_t(records.size());
  s.train_seconds = loop.train_s;
  s.wall_seconds = wall_seconds;
  s.throughput_tokens_per_s = m.throughput;
  s.median_step_s = m.median_step_s;
  s.flops_per_token = mfu.flops_per_token;
  s.peak_flops_per_rank = mfu.peak_flop_per_s;
  s.mfu = mfu.mfu(m.throughput, job.world);
  s.mfu_peak = mfu.peak(m.throughput, job.world);
  s.precision = job.backend->precision();
  s.device_name = job.backend->device_name();
  s.peak_flops_datasheet_per_rank = mfu.datasheet_peak_flop_per_s;
  s.mfu_datasheet = mfu.mfu_datasheet(m.throughput, job.world);
  if (mfu.gemm) s.gemm = gemm_choice_to_json(*mfu.gemm);
  s.first_loss = records.front().loss;
  s.final_loss = records.back().loss;
  s.per_rank_medians = per_rank_table(m.rank_medians);
  s.slowest_rank = slowest_rank(m.rank_medians);
  s.stragglers = m.stragglers;
  s.network_stragglers = m.network_stragglers;
  s.exposed_comm_fraction = m.rank_medians[0][timing_column("comm_exposed_s")] / m.median_step_s;
  s.communication.dp = m.comm_stats;
  if (job.world > 1) s.communication.bare_allreduce_busbw_GBps = m.bare_busbw / 1e9;
  if (job.mesh.tp) s.communication.tp = m.tp_comm_stats;
  s.memory_bytes_rank0 = m.memory;
  s.memory_bytes_by_rank = m.memory_by_rank;
  s.eval = loop.last_eval;
  s.replica_checks = replica_checks_of(o, records);
  s.step_log = step_log.path();
  s.params = m.params_path;
  s.summary = summary_path(o);
  if (job.baseline) s.scaling = scaling_against(*job.baseline, m.throughput, job.world);
  return s;
}

}  // namespace

std::optional<RunSummary> finish_job(Job& job, const ResumePoint& start, const LoopRecords& loop,
                                     const StepLog& step_log, const MfuBasis& mfu, const Stopwatch& job_clock,
                                     const StartupTimes& startup) {
  const RunMeasurements measured = measure_run(job, loop);
  if (job.rank != 0) return std::nullopt;
  RunSummary summary = summary_of(job, start, loop, step_log, mfu, measured, job_clock.seconds());
  summary.startup = startup;
  write_json_file(summary_path(job.options), json_fields::write(summary));
  log_line_rank0(summary_paragraph(summary));
  const std::string stragglers = format_straggler_names(measured.stragglers);
  if (!stragglers.empty()) log_line_rank0("run " + stragglers);
  const std::string network = format_network_stragglers(measured.network_stragglers);
  if (!network.empty()) log_line_rank0("run " + network);
  return summary;
}

}  // namespace shardtrain
