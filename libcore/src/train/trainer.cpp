#include "shardtrain/train/trainer.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/data/batch_loader.hpp"
#include "shardtrain/ckpt/ckpt.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/train/evaluation.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/backend/peak.hpp"
#include "shardtrain/parallel/replicas.hpp"
#include "shardtrain/report/run_summary.hpp"
#include "shardtrain/data/selection.hpp"
#include "shardtrain/report/telemetry.hpp"
#include "shardtrain/model/train_state.hpp"
#include "shardtrain/base/stop_signals.hpp"
#include "shardtrain/parallel/strategy.hpp"
#include "shardtrain/parallel/zero.hpp"

namespace shardtrain {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::unique_ptr<Backend> make_backend(const TrainOptions& o, int world) {
  if (o.device == "cpu") return make_cpu_backend(o.threads);
  if (o.device == "cuda") {
    if (world > 1)
      throw UsageError("--device cuda runs on one rank in this version (NCCL data parallelism is not built yet)");
    return make_cuda_backend(0);
  }
  throw UsageError("--device must be cpu or cuda (got '" + o.device + "')");
}

}  // namespace

nlohmann::json run_training(const TrainOptions& o) {
  const auto job_start = Clock::now();
  if (o.steps < 1) throw UsageError("--steps must be at least 1 (got " + std::to_string(o.steps) + ")");
  if (o.log_every < 1) throw UsageError("--log-every must be at least 1");
  if (o.eval_every < 0) throw UsageError("--eval-every must be >= 0");
  if (o.check_replicas < 0) throw UsageError("--check-replicas must be >= 0");
  if (o.check_replicas > 0 && o.zero_stage == 3)
    throw UsageError("--check-replicas compares full parameter replicas, and ZeRO-3 shards the parameters so no rank "
                     "holds one; use --zero-stage 1 or 2, or ddp-train");
  if (!(o.bucket_mb >= 0)) throw UsageError("--bucket-mb must be >= 0");
  if (!(o.collective_timeout_s > 0)) throw UsageError("--collective-timeout must be positive (seconds)");
  if (o.memory_budget < 0) throw UsageError("--memory-budget must be >= 0 bytes (0: no budget)");
  if (o.zero_stage < 0 || o.zero_stage > 3) throw UsageError("--zero-stage must be 0 (DDP), 1, 2 or 3 (got " + std::to_string(o.zero_stage) + ")");
  o.optimizer.validate();
  std::optional<Baseline> baseline;
  if (!o.baseline_summary.empty()) baseline = read_baseline(o.baseline_summary);  // fail before training
  std::filesystem::create_directories(o.run_dir);

  // The data-parallel group: every rank of the job.
  CommOptions comm_options;
  comm_options.name = "dp";
  comm_options.timeout = std::chrono::milliseconds(static_cast<long long>(o.collective_timeout_s * 1000));
  comm_options.run_dir = o.run_dir;
  comm_options.all_reduce = parse_all_reduce_algorithm(o.allreduce);
  comm_options.on_fatal = mpi_abort_on_fatal();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, comm_options);
  if (!o.inject.empty()) comm->set_fault_injection(FaultInjection::parse(o.inject));
  const int world = comm->size(), rank = comm->rank();

  // Data and model configuration.
  data::SelectionOptions selection{o.cutoff, o.eval_from, o.model.seq_len};
  const auto data = data::TrainingData::open(o.data_path, selection);
  ModelConfig model_config = o.model;
  if (model_config.vocab == 0) model_config.vocab = data.vocab();
  model_config.validate();
  if (data.vocab() > model_config.vocab)
    throw UsageError("dataset " + o.data_path + " has vocabulary " + std::to_string(data.vocab()) +
                     " but the model's --vocab is " + std::to_string(model_config.vocab) + "; raise --vocab");
  const int grad_accum = data::grad_accum_for(std::uint64_t(o.global_batch), o.micro_batch, world);

  {  // --memory-budget: refuse before allocating anything, naming the bytes needed and a layout that fits
    const std::string refusal = check_memory_budget(model_config, o.zero_stage, world, o.micro_batch, o.global_batch,
                                                    o.deterministic, o.memory_budget);
    if (!refusal.empty()) throw UsageError(refusal);
  }

  auto backend = make_backend(o, world);
  StrategyOptions strategy_options;
  strategy_options.zero_stage = o.zero_stage;
  strategy_options.deterministic = o.deterministic;
  strategy_options.bucket_mb = o.bucket_mb;
  strategy_options.micro_batch = o.micro_batch;
  strategy_options.grad_accum = grad_accum;
  strategy_options.reshard_after_forward = o.reshard_after_forward;
  auto strategy = make_strategy(*backend, *comm, model_config, o.optimizer, strategy_options);
  strategy->initialise(o.seed);

  nlohmann::json run_config = {{"model", model_config.to_json()},
                               {"optimizer", o.optimizer.to_json()},
                               {"global_batch", o.global_batch},
                               {"micro_batch", o.micro_batch},
                               {"grad_accum", grad_accum},
                               {"dp_size", world},
                               {"deterministic", o.deterministic},
                               {"zero_stage", o.zero_stage},
                               {"seed", o.seed}};
  // The config hash leaves out the layout (dp_size, micro_batch, grad_accum) so that runs of the
  // same training problem on different world sizes share it.
  nlohmann::json problem = run_config;
  problem.erase("dp_size");
  problem.erase("grad_accum");
  problem.erase("micro_batch");
  RunIdentity identity{hex64(fnv1a64(problem.dump())), data.selection_snapshot_id(), code_version(), ""};

  // Resume (contract 5): the newest valid checkpoint (or the one named), checked against this
  // run: same model, same global batch (contract 1), same seed, same data selection unless
  // --allow-data-change. Another world size is fine: the tensors are logical and the sampler is
  // elastic, so grad_accum adapts and a deterministic run continues bitwise.
  const std::string ckpt_dir = o.ckpt_dir.empty() ? o.run_dir + "/checkpoints" : o.ckpt_dir;
  std::int64_t start_step = 0;
  data::SamplerState start_state{};
  if (!o.resume.empty()) {
    ckpt::ReadOptions ro;
    ro.expected_model = model_config.to_json();
    ro.compatible = [&](const ckpt::CheckpointManifest& m) -> std::string {
      if (m.global_batch != o.global_batch)
        return "global batch " + std::to_string(m.global_batch) + " in the checkpoint vs --global-batch " +
               std::to_string(o.global_batch) + " (the global batch stays across resumes; grad_accum adapts)";
      if (m.extra.contains("seed") && m.extra["seed"].get<std::uint64_t>() != o.seed)
        return "seed " + m.extra["seed"].dump() + " in the checkpoint vs --seed " + std::to_string(o.seed);
      if (!o.allow_data_change && m.data_snapshot_id != data.selection_snapshot_id())
        return "data selection snapshot " + m.data_snapshot_id.substr(0, 12) + " in the checkpoint vs " +
               data.selection_snapshot_id().substr(0, 12) + " now (another dataset or cutoff); pass "
               "--allow-data-change to continue on the new selection";
      return "";
    };
    std::optional<std::string> folder;
    if (o.resume == "auto") {
      folder = ckpt::find_resume_checkpoint_collective(ckpt_dir, MPI_COMM_WORLD, ro);
      ro.verify_files = false;  // rank 0 just validated it
    } else {
      folder = o.resume;
    }
    if (folder) {
      ckpt::CheckpointReader reader(*folder, ro);
      strategy->restore(reader);
      const auto& m = reader.manifest();
      start_step = m.step;
      start_state = {std::uint64_t(m.sampler_epoch), std::uint64_t(m.sampler_consumed)};
      if (start_state.consumed >= data.num_train_samples()) {  // only after --allow-data-change
        log_line_rank0("the new data selection has fewer samples than the checkpoint's epoch position: continuing at "
                       "the start of epoch " + std::to_string(start_state.epoch + 1));
        start_state = {start_state.epoch + 1, 0};
      }
      identity.checkpoint_id = std::filesystem::path(*folder).filename().string();
      log_line_rank0("resumed from " + *folder + ": step " + std::to_string(start_step) + ", sampler epoch " +
                     std::to_string(start_state.epoch) + " consumed " + std::to_string(start_state.consumed) +
                     (m.layout.world_size != world
                          ? ", written by " + std::to_string(m.layout.world_size) + " ranks (grad_accum " +
                                std::to_string(m.grad_accum) + " -> " + std::to_string(grad_accum) + ")"
                          : std::string()));
    } else {
      log_line_rank0("no valid checkpoint in " + ckpt_dir + ": starting from step 0");
    }
  }
  if (start_step >= o.steps) {
    log_line_rank0("the checkpoint is at step " + std::to_string(start_step) + ", at or past --steps " +
                   std::to_string(o.steps) + ": nothing to do");
    return rank == 0 ? nlohmann::json{{"tool", o.tool}, {"steps", 0}, {"resumed_at", start_step}} : nullptr;
  }
  data::BatchLoader loader(data, o.seed, start_state, model_config.seq_len, o.micro_batch, grad_accum, rank, world);

  const auto ckpt_tensors = checkpoint_tensors(strategy->registry());
  ckpt::SaveOptions save_options;
  save_options.keep = o.keep;
  std::unique_ptr<ckpt::AsyncCheckpointWriter> async_writer;
  if (o.async_ckpt) {
    async_writer = std::make_unique<ckpt::AsyncCheckpointWriter>(ckpt_dir, MPI_COMM_WORLD, save_options);
    std::size_t bytes = 0;
    for (const auto& piece : strategy->checkpoint_pieces()) bytes += std::size_t(piece.count) * sizeof(float);
    async_writer->reserve(bytes);  // the first save's stall is then a plain copy
  }
  // Saves the state after `completed` steps; returns the training stall in seconds.
  auto save = [&](std::int64_t completed, const data::SamplerState& state, double lr) {
    ckpt::CheckpointManifest m;
    m.step = completed;
    m.tokens_seen = completed * o.global_batch * model_config.seq_len;
    m.model = model_config.to_json();
    m.config = run_config;
    m.layout = {world, world, 1, strategy->zero_stage()};
    m.global_batch = o.global_batch;
    m.micro_batch = o.micro_batch;
    m.grad_accum = grad_accum;
    m.sampler_epoch = std::int64_t(state.epoch);
    m.sampler_consumed = std::int64_t(state.consumed);
    m.rng = {{"seed", o.seed},
             {"init", "philox4x32-10(seed, fnv1a64(tensor name), element index): stateless"},
             {"sampler", "feistel permutation keyed by (seed, epoch): state is (epoch, consumed)"}};
    m.lr_step = completed;
    m.lr = lr;
    m.data_snapshot_id = data.selection_snapshot_id();
    m.data_cutoff = o.cutoff.value_or("");
    m.extra = {{"seed", o.seed},
               {"config_hash", identity.config_hash},
               {"dataset_snapshot_id", data.dataset_snapshot_id()},
               {"eval_from", o.eval_from.value_or("")},
               {"optimizer", o.optimizer.to_json()}};
    const auto pieces = strategy->checkpoint_pieces();
    const auto t0 = Clock::now();
    if (async_writer) {
      async_writer->save(m, ckpt_tensors, pieces);
    } else {
      ckpt::save_checkpoint(ckpt_dir, m, ckpt_tensors, pieces, MPI_COMM_WORLD, save_options);  // logs the commit
    }
    return since(t0);
  };
  StopSignals stop_signals;

  StepLog step_log(o.run_dir + "/steps.rank" + std::to_string(rank) + ".jsonl", rank, identity);

  const double peak_flop_per_s = o.peak_flop_per_s > 0 ? o.peak_flop_per_s : measure_matmul_peak_flops(*backend);
  const double flops_per_token = model_config.flops_per_token();
  const std::int64_t tokens_per_step = o.global_batch * model_config.seq_len;
  const std::int64_t rank_tokens_per_step = std::int64_t(grad_accum) * o.micro_batch * model_config.seq_len;
  log_line_rank0("model " + format_count(double(model_config.parameter_count())) + " parameters (" +
                 std::to_string(model_config.n_layer) + " layers, d_model " + std::to_string(model_config.d_model) +
                 ", " + std::to_string(model_config.n_head) + " heads, seq_len " + std::to_string(model_config.seq_len) +
                 ", vocab " + std::to_string(model_config.vocab) + ") on " + backend->describe() + "; " +
                 strategy->describe());
  log_line_rank0("batch: global " + std::to_string(o.global_batch) + " = micro " + std::to_string(o.micro_batch) +
                 " x grad_accum " + std::to_string(grad_accum) + " x dp " + std::to_string(world) + " sequences (" +
                 std::to_string(tokens_per_step) + " tokens/step); data " + o.data_path + " (" + std::to_string(data.num_train_samples()) + " train samples, snapshot " +
                 data.selection_snapshot_id().substr(0, 12) + ")");
  char peak_line[128];
  std::snprintf(peak_line, sizeof(peak_line), "matmul peak %.1f GFLOP/s per rank (%s), %.1f MFLOP per token",
                peak_flop_per_s / 1e9, o.peak_flop_per_s > 0 ? "given" : "measured", flops_per_token / 1e6);
  log_line_rank0(peak_line);

  std::vector<StepRecord> records;
  nlohmann::json last_eval = nullptr;
  double comm_busy_before = 0, comm_cpu_before = 0;
  comm->barrier();  // start the clocks together
  const auto train_start = Clock::now();
  bool stopped_by_signal = false;
  for (std::int64_t step = start_step; step < o.steps; ++step) {
    const auto t0 = Clock::now();
    comm->set_step(step);
    comm->maybe_delay();
    auto batch = loader.next();
    StepResult r = strategy->run_step(step, batch.tokens.data(), grad_accum, o.micro_batch, double(tokens_per_step));
    StepRecord rec;
    rec.step = step;
    rec.data_s = batch.wait_s;
    rec.fwd_s = r.timing.forward_s;
    rec.bwd_s = r.timing.backward_s;
    rec.comm_exposed_s = r.timing.comm_exposed_s;
    rec.opt_s = r.timing.optimizer_s;
    if (o.check_replicas > 0 && (step + 1) % o.check_replicas == 0)
      check_replicas(*comm, strategy->registry(), strategy->replicated_parameters(), step);
    const CommStats stats = comm->stats();
    rec.comm_total_s = stats.total_busy_s() - comm_busy_before;
    rec.comm_cpu_s = stats.total_cpu_s() - comm_cpu_before;
    comm_busy_before = stats.total_busy_s();
    comm_cpu_before = stats.total_cpu_s();
    if (async_writer) async_writer->poll();  // rethrows a failed background save: the job fails loudly at this step
    // Every rank agrees whether a stop signal arrived anywhere, so all save the same step.
    std::int32_t stop = StopSignals::received() != 0 ? 1 : 0;
    if (world > 1) comm->all_reduce(&stop, 1);
    const bool last_step = step + 1 == o.steps;
    if (stop || (o.ckpt_every > 0 && ((step + 1) % o.ckpt_every == 0 || last_step)))
      rec.ckpt_s = save(step + 1, batch.state_after, r.lr);
    rec.step_s = since(t0);
    rec.tokens = rank_tokens_per_step;
    rec.loss = r.loss_sum / double(tokens_per_step);
    rec.lr = r.lr;
    rec.grad_norm = r.grad_norm;
    const bool last = last_step || stop;
    if ((o.eval_every > 0 && (step + 1) % o.eval_every == 0) || last) {
      const auto te = Clock::now();
      strategy->with_full_model([&](GptModel& model) { last_eval = evaluate_holdout(model, data, o.eval_samples); });
      if (!last_eval.is_null()) {
        rec.extra = last_eval;
        rec.extra["eval_s"] = since(te);
      }
    }
    step_log.append(rec);
    records.push_back(rec);
    if ((step + 1) % o.log_every == 0 || last || step == 0) {
      const double tok_s = double(tokens_per_step) / rec.step_s;
      char line[320];
      std::snprintf(line, sizeof(line), "step %lld/%lld | loss %.4f | lr %.3e | grad norm %.4f | %.0f tok/s | MFU %.1f%%%s",
                    (long long)step + 1, (long long)o.steps, rec.loss, rec.lr, rec.grad_norm, tok_s,
                    100.0 * tok_s * flops_per_token / (peak_flop_per_s * world),
                    rec.extra.is_null() ? ""
                        : (" | hold-out " + std::to_string(last_eval["holdout_loss"].get<double>()).substr(0, 6)).c_str());
      log_line_rank0(line);
    }
    if (stop) {
      log_line_rank0("stop signal: saved step " + std::to_string(step + 1) + " and stopping; resume with --resume auto");
      stopped_by_signal = true;
      break;
    }
  }
  if (async_writer) async_writer->wait();
  const double train_s = since(train_start);

  // Summary: throughput from rank 0's median step after warm-up (the first step pays for
  // allocation and primitive creation), per-rank medians of every column gathered from all ranks.
  const auto rank_medians = gather_rank_medians(*comm, records);
  std::vector<double> steady;
  for (std::size_t i = records.size() > 3 ? 1 : 0; i < records.size(); ++i) steady.push_back(records[i].step_s);
  const double median_step = SeriesStats::of(steady).median;
  const double throughput = double(tokens_per_step) / median_step;
  const CommStats comm_stats = comm->stats();
  const double bare_busbw = bare_allreduce_busbw(MPI_COMM_WORLD, strategy->registry().total());
  const std::string params_path = o.run_dir + "/params.h5";
  strategy->with_full_model([&](GptModel& model) { write_parameters_file(model, params_path); });
  const nlohmann::json memory = strategy->memory_report();
  // Every rank's peaks (ZeRO shards differ by rank through padding).
  nlohmann::json memory_by_rank = nlohmann::json::array();
  {
    static const char* const keys[] = {"parameters", "gradients", "optimizer", "gathered", "communication",
                                       "activations", "model_state", "total"};
    std::vector<double> mine, all(std::size_t(world) * 8);
    for (const char* k : keys) mine.push_back(memory.contains(k) ? memory[k].get<double>() : 0.0);
    comm->all_gather(mine.data(), all.data(), 8);
    for (int r = 0; r < world; ++r) {
      nlohmann::json j;
      for (int k = 0; k < 8; ++k) j[keys[k]] = all[std::size_t(r) * 8 + k];
      memory_by_rank.push_back(j);
    }
  }
  if (rank != 0) return nullptr;

  nlohmann::json comm_json = comm_stats.to_json();
  if (world > 1) comm_json["bare_allreduce_busbw_GBps"] = bare_busbw / 1e9;
  const std::string summary_path = o.run_dir + "/summary.json";
  nlohmann::json summary = {
      {"tool", o.tool},
      {"identity", identity.to_json()},
      {"config", run_config},
      {"data", data.describe()},
      {"backend", backend->describe()},
      {"layout", strategy->describe()},
      {"parameters", double(model_config.parameter_count())},
      {"world_size", world},
      {"steps", std::int64_t(records.size())},
      {"first_step", start_step},
      {"stopped_by_signal", stopped_by_signal},
      {"checkpoint_dir", ckpt_dir},
      {"tokens", tokens_per_step * std::int64_t(records.size())},
      {"train_seconds", train_s},
      {"wall_seconds", since(job_start)},
      {"throughput_tokens_per_s", throughput},
      {"median_step_s", median_step},
      {"flops_per_token", flops_per_token},
      {"peak_flops_per_rank", peak_flop_per_s},
      {"mfu", throughput * flops_per_token / (peak_flop_per_s * world)},
      {"first_loss", records.front().loss},
      {"final_loss", records.back().loss},
      {"per_rank_medians", per_rank_table(rank_medians)},
      {"slowest_rank", slowest_rank(rank_medians)},
      {"exposed_comm_fraction", rank_medians[0][timing_column("comm_exposed_s")] / median_step},
      {"communication", comm_json},
      {"memory_bytes_rank0", memory},
      {"memory_bytes_by_rank", memory_by_rank},
      {"eval", last_eval},
      {"step_log", step_log.path()},
      {"params", params_path},
      {"summary", summary_path},
  };
  if (baseline) add_scaling(summary, *baseline, throughput, world);
  write_json_file(summary_path, summary);
  log_line_rank0(summary_paragraph(summary));
  return summary;
}

}  // namespace shardtrain
