#include "job.hpp"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include <unistd.h>

#include "shardtrain/backend/capabilities.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/backend/peak.hpp"
#include "shardtrain/base/host.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/process_stats.hpp"
#include "shardtrain/comm/fault_injection.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/comm/hierarchical.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/comm/nccl.hpp"
#include "shardtrain/comm/string_collectives.hpp"
#include "shardtrain/data/sampler.hpp"
#include "shardtrain/model/parameters.hpp"
#include "shardtrain/parallel/layout_plan.hpp"
#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/stepmodel/two_level.hpp"
#include "shardtrain/telemetry/rank_hosts.hpp"

namespace shardtrain {

// Every check of the options alone, before anything is opened or allocated. What a layout may be
// (--zero-stage, --tp, --precision, the device, --memory-budget) is the planner's, asked by
// plan_training_layout as soon as the model and the world are known.
void validate_training_options(const TrainOptions& o) {
  const ScheduleOptions& sc = o.schedule;
  const ParallelismOptions& p = o.parallelism;
  const TelemetryOptions& t = o.telemetry;
  if (sc.steps < 1) throw UsageError("--steps must be at least 1 (got " + std::to_string(sc.steps) + ")");
  if (sc.micro_batch < 1) throw UsageError("--micro-batch must be at least 1 (got " + std::to_string(sc.micro_batch) + ")");
  if (sc.global_batch < 1)
    throw UsageError("--global-batch must be at least 1 (got " + std::to_string(sc.global_batch) + ")");
  if (o.model.seq_len < 1) throw UsageError("--seq-len must be at least 1 (got " + std::to_string(o.model.seq_len) + ")");
  if (t.log_every < 1) throw UsageError("--log-every must be at least 1");
  if (o.evaluation.every < 0) throw UsageError("--eval-every must be >= 0");
  if (t.check_replicas < 0) throw UsageError("--check-replicas must be >= 0");
  if (t.check_replicas > 0 && p.zero_stage == 3)
    throw UsageError("--check-replicas compares full parameter replicas, and ZeRO-3 shards the parameters so no rank "
                     "holds one; use --zero-stage 1 or 2, or ddp-train");
  if (!(p.bucket_mb >= 0)) throw UsageError("--bucket-mb must be >= 0");
  if (!(t.collective_timeout_s > 0)) throw UsageError("--collective-timeout must be positive (seconds)");
  if (p.gemm != GemmLibrary::kAuto && p.device != DeviceKind::kCpu)
    throw UsageError(std::string("--gemm ") + gemm_library_name(p.gemm) + " chooses the CPU backend's GEMM library; "
                     "with --device cuda use --gemm auto");
  require_gemm_library(p.gemm);  // --gemm blis in a build without BLIS: exit 2 naming the package
  if (p.allreduce == AllReduceAlgorithm::kHierarchical && p.device == DeviceKind::kCuda && p.transport != Transport::kMpi)
    throw UsageError("--allreduce hierarchical runs over the MPI transport (NCCL builds its own node-aware rings); "
                     "with --device cuda give --transport mpi, or use --allreduce auto");
  if (p.transport == Transport::kNccl && p.device != DeviceKind::kCuda)
    throw UsageError("--transport nccl needs --device cuda (NCCL moves GPU memory); use --transport mpi or auto");
  if (p.memory_budget < 0) throw UsageError("--memory-budget must be >= 0 bytes (0: no budget)");
  if (!(t.straggler_threshold > 0 && t.straggler_threshold <= 1))
    throw UsageError("--straggler-threshold must be in (0, 1] (got " + std::to_string(t.straggler_threshold) + ")");
  if (t.straggler_window < 2)
    throw UsageError("--straggler-window must be at least 2 steps (got " + std::to_string(t.straggler_window) + ")");
  if (t.metrics_port < 0 || t.metrics_port > 65535)
    throw UsageError("--metrics-port must be a port in 1..65535, or 0 for no metrics (got " + std::to_string(t.metrics_port) + ")");
  o.optimizer.validate();
}

namespace {

// Where this rank runs on a GPU: its rank among the ranks of its node modulo the node's visible
// devices (so W ranks on a one-GPU node share device 0), and whether every rank of the node has a
// GPU of its own (what NCCL needs).
struct DevicePlacement {
  int device_index = 0;
  bool own_gpu = false;
  std::vector<std::string> hosts;  // every rank's host name, by world rank
};
DevicePlacement place_on_device(const TrainOptions& o) {
  // Every rank's host name, gathered on a group of its own, so this collective too has a sequence
  // number, a timeout and a flight record (a bare MPI_Comm_split_type on MPI_COMM_WORLD had none of
  // them and could hang silently); on CUDA the node-local rank picks the device.
  const auto placement = make_mpi_communicator(MPI_COMM_WORLD, comm_options_for(o, "placement"));
  const std::vector<std::string> hosts = all_gather_strings(host_name(), *placement);
  if (o.parallelism.device != DeviceKind::kCuda) return {0, false, hosts};
  const int me = placement->rank();
  int local_rank = 0, local_size = 0;
  for (int r = 0; r < int(hosts.size()); ++r)
    if (hosts[std::size_t(r)] == hosts[std::size_t(me)]) local_rank += r < me, ++local_size;
  const int devices = cuda_device_count();
  if (devices < 1) return {0, false, hosts};  // make_cuda_backend then says why
  return {local_rank % devices, local_size <= devices, hosts};
}

// The job's group: every rank, with the options' timeout, algorithm and faults, over --transport:
// MPI (on CUDA with host staging of device buffers) or NCCL. Named "dp" when it is the data-
// parallel group itself (T = 1), "world" when the mesh splits it.
std::unique_ptr<Communicator> make_job_comm(const TrainOptions& o, const DevicePlacement& place) {
  const ParallelismOptions& p = o.parallelism;
  CommOptions options = comm_options_for(o, p.tp > 1 ? "world" : "dp");
  bool nccl = p.transport == Transport::kNccl;
  if (p.transport == Transport::kAuto) nccl = p.device == DeviceKind::kCuda && nccl_transport_available() && place.own_gpu;
  std::unique_ptr<Communicator> comm;
  if (nccl) {
    comm = make_nccl_communicator(MPI_COMM_WORLD, place.device_index, std::move(options));
  } else {
    if (p.device == DeviceKind::kCuda) options.device_memory = make_cuda_device_memory(place.device_index);
    comm = make_mpi_communicator(MPI_COMM_WORLD, std::move(options));
  }
  if (!o.inject.empty()) comm->set_fault_injection(FaultInjection::parse(o.inject));
  return comm;
}

// Collective: the DP x TP mesh (job.hpp). The splits inherit the job group's options and faults.
Mesh make_mesh(Communicator& world, int tp) {
  Mesh mesh;  // validate_tensor_parallel has checked that tp divides the world
  mesh.tp_size = tp;
  mesh.dp_size = world.size() / tp;
  mesh.tp_rank = world.rank() % tp;
  mesh.dp_rank = world.rank() / tp;
  if (tp == 1) {
    mesh.dp = &world;
    return mesh;
  }
  // Names unique across the job ("tp0" is the TP group of DP rank 0, "dp1" the DP group of TP rank
  // 1): hang-diagnose matches a group's records across ranks by name.
  mesh.tp_group = world.split(mesh.dp_rank, mesh.tp_rank, "tp" + std::to_string(mesh.dp_rank));
  mesh.dp_group = world.split(mesh.tp_rank, mesh.dp_rank, "dp" + std::to_string(mesh.tp_rank));
  mesh.dp = mesh.dp_group.get();
  mesh.tp = mesh.tp_group.get();
  return mesh;
}

// --allreduce auto with a step model: which operations go hierarchical from which size on this
// placement, and the log line saying so. Uneven nodes stay flat: the model prices N x L nodes.
HierarchyOptions choose_by_size(const ParallelismOptions& p, const NodePlacement& placement, std::string& said) {
  HierarchyOptions options;
  options.host_buffers = p.device == DeviceKind::kCpu;
  options.pipeline_chunk_bytes = p.hierarchical_chunk_bytes;
  options.choice = HierarchyChoice::kFlat;
  said = "allreduce: auto by " + p.hierarchy_source + " on " + placement.describe() + ": ";
  if (!placement.hierarchical()) return said += "flat (nothing to split)", options;
  if (!placement.uniform()) return said += "flat (uneven nodes: the model prices N nodes x L ranks)", options;
  options.min_bytes = scaling::hierarchical_thresholds(*p.hierarchy_model, {placement.nodes(), placement.ranks_per_node()});
  std::string from;
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    const std::uint64_t b = options.min_bytes[static_cast<int>(op)];
    if (b == kNeverHierarchical) continue;
    from += std::string(from.empty() ? "" : ", ") + op_name(op) + " from " + std::to_string(b) + " bytes";
  }
  if (from.empty()) return said += "flat at every size (the two levels never cost less)", options;
  options.choice = HierarchyChoice::kBySize;
  said += "hierarchical for " + from + ", flat below";
  return options;
}

// --allreduce hierarchical (or auto with a step model): the DP group over its ranks' nodes
// (collective over it; on one node it stays flat). The node of a rank is its host's, or
// SHARDTRAIN_NODE_OF_RANK's label for it.
void make_hierarchical_dp(const TrainOptions& o, Mesh& mesh) {
  const ParallelismOptions& p = o.parallelism;
  const bool by_size = p.allreduce == AllReduceAlgorithm::kAuto && p.hierarchy_model;
  if (p.allreduce != AllReduceAlgorithm::kHierarchical && !by_size) return;
  const std::string label = node_label_of_this_rank(mesh.dp->world_rank(), mesh.dp->world_size());
  std::string said;
  mesh.dp_hierarchical = make_hierarchical_communicator(*mesh.dp, label, [&](const NodePlacement& placement) {
    if (by_size) return choose_by_size(p, placement, said);
    HierarchyOptions always;
    always.host_buffers = p.device == DeviceKind::kCpu;
    always.pipeline_chunk_bytes = p.hierarchical_chunk_bytes;
    said = "allreduce: hierarchical over " + placement.describe() +
           (placement.hierarchical() ? ""
            : placement.nodes() == 1 ? " (flat: every rank on one node)" : " (flat: one rank per node)");
    return always;
  });
  mesh.dp = mesh.dp_hierarchical.get();
  log_line_rank0(said);
}

// The job's identity in every flight record (FORMATS.md "job_id"): rank 0 draws it, every rank
// takes it, so hang-diagnose can refuse dumps of different launches read together.
std::string agree_on_job_id(Communicator& comm) {
  std::uint64_t id[2] = {0, 0};
  if (comm.rank() == 0) {
    std::random_device entropy;
    id[0] = (std::uint64_t(entropy()) << 32) ^ entropy();
    id[1] = std::uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  }
  comm.broadcast(id, 2, 0);
  return hex64(id[0] ^ fnv1a64(std::to_string(id[1])));
}

// options.model with vocab 0 resolved to the dataset's; refuses a vocabulary smaller than the data's.
ModelConfig model_config_for(const TrainOptions& o, const data::TrainingData& data) {
  ModelConfig model = o.model;
  if (model.vocab == 0) model.vocab = data.vocab();
  model.validate();
  if (data.vocab() > model.vocab)
    throw UsageError("dataset " + o.data.path + " has vocabulary " + std::to_string(data.vocab()) +
                     " but the model's --vocab is " + std::to_string(model.vocab) + "; raise --vocab");
  return model;
}

std::unique_ptr<Backend> make_backend(const TrainOptions& o, const LayoutPlan& plan, const DevicePlacement& place) {
  if (o.parallelism.device == DeviceKind::kCuda) return make_cuda_backend(place.device_index, plan.precision);
  return make_cpu_backend(o.parallelism.threads);
}

std::unique_ptr<TrainingStrategy> make_initialised_strategy(const TrainOptions& o, Backend& backend,
                                                            const Mesh& mesh, const ModelConfig& model,
                                                            const LayoutPlan& plan, int grad_accum) {
  StrategyOptions strategy_options;
  strategy_options.zero_stage = plan.zero_stage;
  strategy_options.sharded = plan.sharded;
  strategy_options.deterministic = o.parallelism.deterministic;
  strategy_options.bucket_mb = o.parallelism.bucket_mb;
  strategy_options.micro_batch = o.schedule.micro_batch;
  strategy_options.grad_accum = grad_accum;
  strategy_options.reshard_after_forward = o.parallelism.reshard_after_forward;
  strategy_options.tp_comm = mesh.tp;
  auto strategy = make_strategy(backend, *mesh.dp, model, o.optimizer, strategy_options);
  strategy->initialise(o.schedule.seed);
  return strategy;
}

nlohmann::json run_config_of(const TrainOptions& o, const ModelConfig& model, int grad_accum, const Mesh& mesh) {
  return {{"model", model.to_json()},
          {"optimizer", o.optimizer.to_json()},
          {"global_batch", o.schedule.global_batch},
          {"micro_batch", o.schedule.micro_batch},
          {"grad_accum", grad_accum},
          {"dp_size", mesh.dp_size},
          {"tp_size", mesh.tp_size},
          {"deterministic", o.parallelism.deterministic},
          {"zero_stage", o.parallelism.zero_stage},
          {"seed", o.schedule.seed}};
}

// The config hash leaves out the layout (dp_size, tp_size, micro_batch, grad_accum) so that runs
// of the same training problem on different world sizes and meshes share it.
RunIdentity identity_of(const nlohmann::json& run_config, const data::TrainingData& data) {
  nlohmann::json problem = run_config;
  problem.erase("dp_size");
  problem.erase("tp_size");
  problem.erase("grad_accum");
  problem.erase("micro_batch");
  return {hex64(fnv1a64(problem.dump())), data.selection_snapshot_id(), code_version(), ""};
}

}  // namespace

CommOptions comm_options_for(const TrainOptions& o, const std::string& group_name) {
  CommOptions comm_options;
  comm_options.name = group_name;
  comm_options.timeout = std::chrono::milliseconds(static_cast<long long>(o.telemetry.collective_timeout_s * 1000));
  comm_options.run_dir = o.run_dir;
  comm_options.all_reduce = o.parallelism.allreduce;
  comm_options.on_fatal = mpi_abort_on_fatal();
  comm_options.recorder_capacity = std::size_t(o.telemetry.flight_entries);
  return comm_options;
}

namespace {
// The request of the options: the one mapping from the trainers' flags to the planner's input.
LayoutRequest training_layout_request(const TrainOptions& o, const ModelConfig& model, int world) {
  const ParallelismOptions& p = o.parallelism;
  LayoutRequest r;
  r.model = model;
  r.world = world;
  r.tp = p.tp;
  r.zero_stage = p.zero_stage;
  r.capabilities = backend_capabilities(p.device);
  r.precision = p.precision;
  r.micro_batch = o.schedule.micro_batch;
  r.global_batch = o.schedule.global_batch;
  r.deterministic = p.deterministic;
  r.memory_budget = p.memory_budget;
  return r;
}
}  // namespace

LayoutDecision plan_training_layout(const TrainOptions& o, const ModelConfig& model, int world) {
  return plan_layout(training_layout_request(o, model, world));
}

Job set_up_job(const TrainOptions& o) {
  validate_training_options(o);
  std::optional<Baseline> baseline;
  if (!o.telemetry.baseline_summary.empty()) baseline = read_baseline(o.telemetry.baseline_summary);  // fail before training
  std::filesystem::create_directories(o.run_dir);
  auto data = data::TrainingData::open(o.data.path,
                                       data::SelectionOptions{o.data.cutoff, o.data.eval_from, o.model.seq_len});
  const ModelConfig model = model_config_for(o, data);
  // The layout, before any communicator, device or allocation: refused here (LayoutRefused, exit
  // 2) exactly when the planner refuses it, for the same reason.
  const LayoutPlan plan = plan_training_layout(o, model, mpi_world_size()).value();
  const DevicePlacement place = place_on_device(o);
  auto comm = make_job_comm(o, place);
  set_flight_job_id(agree_on_job_id(*comm));
  std::optional<RunFolderOwner> owner = take_run_folder(o.run_dir, *comm);
  // The rank -> host table, once this job owns the folder: a dead rank leaves no flight record,
  // and the launcher names its host (and tells a lost node from a lost rank) from this file.
  if (comm->rank() == 0) write_rank_hosts(o.run_dir, RankHosts{flight_job_id(), place.hosts});
  const int world = comm->size(), rank = comm->rank();
  Mesh mesh = make_mesh(*comm, plan.tp);
  make_hierarchical_dp(o, mesh);
  const int grad_accum =
      data::grad_accum_for(std::uint64_t(o.schedule.global_batch), o.schedule.micro_batch, mesh.dp_size);
  const double resident_before_state = process_memory().resident_bytes;
  auto backend = make_backend(o, plan, place);
  auto strategy = make_initialised_strategy(o, *backend, mesh, model, plan, grad_accum);
  nlohmann::json run_config = run_config_of(o, model, grad_accum, mesh);
  RunIdentity identity = identity_of(run_config, data);
  std::string ckpt_dir = o.checkpoint.dir.empty() ? o.run_dir + "/checkpoints" : o.checkpoint.dir;
  return Job{o,
             std::move(owner),
             std::move(baseline),
             std::move(comm),
             std::move(mesh),
             world,
             rank,
             place.hosts,
             std::move(data),
             model,
             grad_accum,
             std::move(backend),
             std::move(strategy),
             std::move(run_config),
             std::move(identity),
             std::move(ckpt_dir),
             resident_before_state};
}

void rethrow_together(const Job& job, std::exception_ptr mine, const std::string& elsewhere) {
  std::int32_t failed[2] = {0, 0};  // ranks whose error was a UsageError, ranks with any other
  if (mine) {
    try {
      std::rethrow_exception(mine);
    } catch (const UsageError&) {
      failed[0] = 1;
    } catch (...) {
      failed[1] = 1;
    }
  }
  if (job.world > 1) job.comm->all_reduce(failed, 2);
  if (mine) std::rethrow_exception(mine);
  if (failed[0] > 0) throw UsageError(elsewhere);
  if (failed[1] > 0) throw IoError(elsewhere);
}

void rebuild_strategy(Job& job) {
  const TrainOptions& o = job.options;
  job.strategy.reset();  // its memory first: two states of a large model may not fit
  const LayoutPlan plan = plan_training_layout(o, job.model, mpi_world_size()).value();
  job.strategy = make_initialised_strategy(o, *job.backend, job.mesh, job.model, plan, job.grad_accum);
}

namespace {

constexpr int kPeakRepeats = 10;  // back-to-back products timed together (measure_matmul_peak_flops' count)

// Collective over the job's group: every rank builds its probe (allocation, warm-ups), waits at a
// barrier, then times its products while every other rank times its own; the per-rank peak is
// the slowest rank's rate. Measured rank by rank, or while other ranks were still loading data,
// each rank would see the cores the others leave idle, and on shared cores the peak would be up to
// W times too high (MFU 147-194% was printed for 2 and 4 ranks on 2 loaded cores).
double measure_peak_with_every_rank(Communicator& comm, Backend& backend) {
  MatmulPeakProbe probe(backend);
  comm.barrier();
  const double mine = probe.run(kPeakRepeats);
  std::vector<double> every(std::size_t(comm.size()));
  comm.all_gather(&mine, every.data(), 1);
  const double longest = *std::max_element(every.begin(), every.end());
  return probe.flops_per_product() * kPeakRepeats / longest;
}

// Collective over the job's group: the CPU backend's GEMM library, one for the whole job.
//  * Rank 0 looks the model's key up in the cache of decisions (cpu_gemm.hpp) and broadcasts the
//    cached library, if any: every rank takes it, nothing is measured (so runs that must agree
//    bitwise, two with one seed or a resumed one, run on the same library).
//  * Otherwise every rank measures every linked library at the model's (local) shapes at once,
//    after a barrier, like the peak; the seconds are all-gathered and each shape's slowest rank
//    taken, so every rank holds the same numbers and choose_gemm_library's rule gives every rank
//    the same library. Rank 0 then writes the cache.
// Forced (--gemm) and deterministic mode (oneDNN) measure nothing and skip the cache.
GemmChoice choose_gemm_with_every_rank(Communicator& comm, const Job& job) {
  const ParallelismOptions& p = job.options.parallelism;
  const ModelConfig& m = job.model;
  const int tp = job.mesh.tp_size;
  GemmProbeModel probe;
  probe.batch = job.options.schedule.micro_batch;
  probe.seq_len = m.seq_len;
  probe.channels = m.d_model;
  probe.attention_channels = m.d_model / tp;
  probe.heads = m.n_head / tp;
  probe.mlp_channels = 4 * m.d_model / tp;
  probe.vocab = (m.vocab + tp - 1) / tp;  // the local slice of the LM head (padded to a multiple of T)
  probe.layers = m.n_layer;
  const bool measure = p.gemm == GemmLibrary::kAuto && !p.deterministic;
  std::vector<GemmLibraryRates> rates;
  if (measure) {
    const std::string cache = job.rank == 0 ? gemm_cache_path(probe, p.threads) : "";
    std::optional<GemmChoice> cached = job.rank == 0 ? read_gemm_cache(cache) : std::nullopt;
    int cached_library = cached ? int(cached->library) : -1;
    comm.broadcast(&cached_library, 1, 0);
    if (cached_library >= 0) {
      GemmChoice choice = cached ? *cached : GemmChoice{};
      choice.library = GemmLibrary(cached_library);
      if (cached) choice.reason = "cached decision (" + cache + "): " + cached->reason;
      set_cpu_gemm_library(*job.backend, choice.library);
      return choice;
    }
    comm.barrier();
    rates = probe_gemm_libraries(*job.backend, probe, linked_gemm_libraries());
    std::vector<double> mine;
    for (const GemmLibraryRates& r : rates)
      for (const GemmShapeRate& s : r.shapes) mine.push_back(s.seconds);
    std::vector<double> every(mine.size() * std::size_t(comm.size()));
    comm.all_gather(mine.data(), every.data(), mine.size());
    for (std::size_t i = 0, at = 0; i < rates.size(); ++i)
      for (GemmShapeRate& s : rates[i].shapes) {
        for (int r = 0; r < comm.size(); ++r) s.seconds = std::max(s.seconds, every[std::size_t(r) * mine.size() + at]);
        ++at;
      }
    GemmChoice choice = choose_gemm_library(p.gemm, p.deterministic, std::move(rates));
    if (job.rank == 0 && !cache.empty() && !write_gemm_cache(cache, choice))
      log_line_rank0("gemm: could not write the decision cache " + cache + " (the next run measures again)");
    set_cpu_gemm_library(*job.backend, choice.library);
    return choice;
  }
  GemmChoice choice = choose_gemm_library(p.gemm, p.deterministic, std::move(rates));
  set_cpu_gemm_library(*job.backend, choice.library);
  return choice;
}

// Collective: how the job's ranks sit on hosts (hostname and CPU count of every rank); sets the
// basis' max_ranks_per_host, host_cpus (of that host) and shared_cores (CPU runs only).
void note_core_sharing(Communicator& comm, const TrainOptions& o, MfuBasis& basis) {
  const std::string mine = host_name() + "\t" + std::to_string(host_cpus());
  std::map<std::string, int> ranks_on;  // "host\tcpus" -> ranks
  for (const std::string& h : all_gather_strings(mine, comm)) ++ranks_on[h];
  bool shared = false;
  for (const auto& [host, ranks] : ranks_on) {
    const int cpus = std::stoi(host.substr(host.rfind('\t') + 1));
    shared = shared || std::int64_t(ranks) * std::max(1, o.parallelism.threads) > cpus;
    if (ranks > basis.max_ranks_per_host) basis.max_ranks_per_host = ranks, basis.host_cpus = cpus;
  }
  if (o.parallelism.device == DeviceKind::kCpu) basis.shared_cores = shared;
}

}  // namespace

MfuPeak MfuBasis::peak(double tokens_per_s, int world) const {
  const bool exceeded = ratio(tokens_per_s, world) > 1.0;
  std::string basis = peak_given ? "given (--peak-gflops)"
                                 : "measured with all " + std::to_string(ranks_measured_at_once) + " ranks at once";
  if (shared_cores && *shared_cores)
    basis += ", on shared cores (" + std::to_string(max_ranks_per_host) + " ranks on " + std::to_string(host_cpus) +
             " CPUs)";
  if (exceeded) basis += "; the achieved rate exceeded this peak, so MFU is reported as 1 (the peak is too low)";
  MfuPeak p;
  p.basis = basis;
  p.source = peak_given ? "given" : "measured";
  p.ranks_measured_at_once = ranks_measured_at_once;
  p.shared_cores = shared_cores;
  if (max_ranks_per_host) p.max_ranks_per_host = max_ranks_per_host;
  if (host_cpus) p.host_cpus = host_cpus;
  p.achieved_flops_per_rank = tokens_per_s * flops_per_token / world;
  p.peak_exceeded = exceeded;
  return p;
}

MfuBasis announce_job(const Job& job) {
  const TrainOptions& o = job.options;
  const ModelConfig& m = job.model;
  MfuBasis basis;
  basis.flops_per_token = m.flops_per_token();
  basis.datasheet_peak_flop_per_s = datasheet_peak_flops(job.backend->device_name(), job.backend->precision());
  if (o.parallelism.device == DeviceKind::kCpu) {
    basis.gemm = choose_gemm_with_every_rank(*job.comm, job);  // before the peak: it is the chosen library's
    log_line_rank0("gemm: " + std::string(gemm_library_name(basis.gemm->library)) + " (" +
                   gemm_library_version(basis.gemm->library) + "): " + basis.gemm->reason);
  }
  basis.peak_given = o.telemetry.peak_flop_per_s > 0;
  if (basis.peak_given) {
    basis.peak_flop_per_s = o.telemetry.peak_flop_per_s;
  } else {
    note_core_sharing(*job.comm, o, basis);
    basis.peak_flop_per_s = measure_peak_with_every_rank(*job.comm, *job.backend);
    basis.ranks_measured_at_once = job.world;
  }
  log_line_rank0("model " + format_count(double(m.parameter_count())) + " parameters (" + std::to_string(m.n_layer) +
                 " layers, d_model " + std::to_string(m.d_model) + ", " + std::to_string(m.n_head) +
                 " heads, seq_len " + std::to_string(m.seq_len) + ", vocab " + std::to_string(m.vocab) + ") on " +
                 job.backend->describe() + "; " + job.strategy->describe());
  log_line_rank0("batch: global " + std::to_string(o.schedule.global_batch) + " = micro " +
                 std::to_string(o.schedule.micro_batch) +
                 " x grad_accum " + std::to_string(job.grad_accum) + " x dp " + std::to_string(job.mesh.dp_size) +
                 " sequences" +
                 (job.mesh.tp_size > 1 ? " on a mesh of dp " + std::to_string(job.mesh.dp_size) + " x tp " +
                                             std::to_string(job.mesh.tp_size) + " = " + std::to_string(job.world) +
                                             " ranks"
                                       : std::string()) +
                 " (" + std::to_string(job.tokens_per_step()) + " tokens/step); data " + o.data.path + " (" +
                 std::to_string(job.data.num_train_samples()) + " train samples, snapshot " +
                 job.data.selection_snapshot_id().substr(0, 12) + ")");
  char peak_line[256];
  const std::string how = basis.peak_given ? "given"
                          : "measured with all " + std::to_string(job.world) + " ranks at once" +
                                (basis.shared_cores && *basis.shared_cores ? ", on shared cores" : "");
  std::snprintf(peak_line, sizeof(peak_line), "matmul peak %.1f GFLOP/s per rank (%s), %.1f MFLOP per token",
                basis.peak_flop_per_s / 1e9, how.c_str(), basis.flops_per_token / 1e6);
  log_line_rank0(peak_line);
  if (basis.datasheet_peak_flop_per_s) {
    std::snprintf(peak_line, sizeof(peak_line), "datasheet dense %s peak of %s: %.1f TFLOP/s (measured: %.0f%% of it)",
                  precision_name(job.backend->precision()), job.backend->device_name().c_str(),
                  *basis.datasheet_peak_flop_per_s / 1e12, 100.0 * basis.peak_flop_per_s / *basis.datasheet_peak_flop_per_s);
    log_line_rank0(peak_line);
  }
  return basis;
}

}  // namespace shardtrain
