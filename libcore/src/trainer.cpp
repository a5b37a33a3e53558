#include "shardtrain/trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "shardtrain/backend.hpp"
#include "shardtrain/batch_loader.hpp"
#include "shardtrain/error.hpp"
#include "shardtrain/gpt.hpp"
#include "shardtrain/h5file.hpp"
#include "shardtrain/hash.hpp"
#include "shardtrain/init.hpp"
#include "shardtrain/log.hpp"
#include "shardtrain/peak.hpp"
#include "shardtrain/selection.hpp"
#include "shardtrain/telemetry.hpp"
#include "shardtrain/train_step.hpp"

namespace shardtrain {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string format_count(double value) {
  char buf[64];
  if (value >= 1e9) std::snprintf(buf, sizeof(buf), "%.2fB", value / 1e9);
  else if (value >= 1e6) std::snprintf(buf, sizeof(buf), "%.2fM", value / 1e6);
  else if (value >= 1e4) std::snprintf(buf, sizeof(buf), "%.1fk", value / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.0f", value);
  return buf;
}

std::unique_ptr<Backend> make_backend(const TrainOptions& o) {
  if (o.device == "cpu") return make_cpu_backend(o.threads);
  if (o.device == "cuda") return make_cuda_backend(0);
  throw UsageError("--device must be cpu or cuda (got '" + o.device + "')");
}

// Hold-out loss overall and per owner slice: up to `max_samples` samples, spread evenly over
// the slices (each slice's first samples), evaluated in micro-batches of one slice each.
nlohmann::json evaluate_holdout(GptModel& model, const data::TrainingData& data, int max_samples) {
  const auto& slices = data.holdout_slices();
  if (slices.empty() || data.num_holdout_samples() == 0) return nullptr;
  const std::size_t T = model.config().seq_len;
  const std::uint64_t per_slice = std::max<std::uint64_t>(1, std::uint64_t(max_samples) / slices.size());
  std::vector<std::int32_t> tokens(std::size_t(model.max_batch()) * (T + 1));
  double total_loss = 0, total_tokens = 0;
  nlohmann::json by_owner = nlohmann::json::object();
  for (const auto& slice : slices) {
    const std::uint64_t n = std::min(per_slice, slice.samples);
    if (n == 0) continue;
    double loss = 0;
    for (std::uint64_t first = 0; first < n; first += model.max_batch()) {
      const int b = int(std::min<std::uint64_t>(model.max_batch(), n - first));
      for (int j = 0; j < b; ++j) data.read_holdout_sample(slice.first_sample + first + j, tokens.data() + j * (T + 1));
      loss += model.eval_micro_batch(tokens.data(), b);
    }
    const double count = double(n) * T;
    by_owner[slice.owner] = loss / count;
    total_loss += loss;
    total_tokens += count;
  }
  if (total_tokens == 0) return nullptr;
  return {{"holdout_loss", total_loss / total_tokens}, {"holdout_tokens", total_tokens}, {"holdout_loss_by_owner", by_owner}};
}

// Final parameters as logical tensors, params/<name> with their logical shapes (equiv-check input).
void write_parameters(const GptModel& model, const std::string& path) {
  const std::vector<float> flat = model.download_parameters();
  const std::string tmp = path + ".tmp";
  {
    H5File f(tmp, H5File::Mode::kCreate);
    for (const auto& t : model.registry().tensors())
      f.write_floats("params/" + t.name, std::vector<float>(flat.begin() + t.offset, flat.begin() + t.offset + t.numel),
                     t.shape);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw IoError(path + ": cannot rename from " + tmp + ": " + ec.message());
}

}  // namespace

nlohmann::json run_training(const TrainOptions& o) {
  const auto job_start = Clock::now();
  if (o.steps < 1) throw UsageError("--steps must be at least 1 (got " + std::to_string(o.steps) + ")");
  if (o.log_every < 1) throw UsageError("--log-every must be at least 1");
  if (o.eval_every < 0) throw UsageError("--eval-every must be >= 0");
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 1)
    throw UsageError("ddp-train runs on 1 rank in this version (launched on " + std::to_string(world) +
                     "); multi-rank data parallelism is not built yet");
  o.optimizer.validate();

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

  std::filesystem::create_directories(o.run_dir);
  auto backend = make_backend(o);
  GptModel model(*backend, model_config, o.micro_batch);
  model.set_parameters(init_parameters(model.registry(), o.seed, model_config.n_layer));
  StepRunner runner(model, o.optimizer);
  data::BatchLoader loader(data, o.seed, data::SamplerState{}, model_config.seq_len, o.micro_batch, grad_accum, 0, world);

  nlohmann::json run_config = {{"model", model_config.to_json()},
                               {"optimizer", o.optimizer.to_json()},
                               {"global_batch", o.global_batch},
                               {"micro_batch", o.micro_batch},
                               {"grad_accum", grad_accum},
                               {"dp_size", world},
                               {"seed", o.seed}};
  RunIdentity identity{hex64(fnv1a64(run_config.dump())), data.selection_snapshot_id(), code_version(), ""};
  StepLog step_log(o.run_dir + "/steps.rank0.jsonl", 0, identity);

  const double peak = o.peak_flops > 0 ? o.peak_flops : measure_matmul_peak_flops(*backend);
  const double flops_per_token = model_config.flops_per_token();
  const std::int64_t tokens_per_step = o.global_batch * model_config.seq_len;
  log_line_rank0("model " + format_count(double(model_config.parameter_count())) + " parameters (" +
                 std::to_string(model_config.n_layer) + " layers, d_model " + std::to_string(model_config.d_model) +
                 ", " + std::to_string(model_config.n_head) + " heads, seq_len " + std::to_string(model_config.seq_len) +
                 ", vocab " + std::to_string(model_config.vocab) + ") on " + backend->describe());
  log_line_rank0("batch: global " + std::to_string(o.global_batch) + " = micro " + std::to_string(o.micro_batch) +
                 " x grad_accum " + std::to_string(grad_accum) + " x dp " + std::to_string(world) + " sequences (" +
                 std::to_string(tokens_per_step) + " tokens/step); data " + o.data_path + " (" +
                 std::to_string(data.num_train_samples()) + " train samples, snapshot " +
                 data.selection_snapshot_id().substr(0, 12) + ")");
  char peak_line[128];
  std::snprintf(peak_line, sizeof(peak_line), "matmul peak %.1f GFLOP/s (%s), %.1f MFLOP per token",
                peak / 1e9, o.peak_flops > 0 ? "given" : "measured", flops_per_token / 1e6);
  log_line_rank0(peak_line);

  std::vector<double> step_times, data_times, fwd_times, bwd_times, opt_times, throughputs;
  std::vector<double> losses;
  nlohmann::json last_eval = nullptr;
  const auto train_start = Clock::now();
  for (std::int64_t step = 0; step < o.steps; ++step) {
    const auto t0 = Clock::now();
    auto batch = loader.next();
    StepResult r = runner.run(step, batch.tokens.data(), grad_accum, o.micro_batch, double(tokens_per_step));
    StepRecord rec;
    rec.step = step;
    rec.data_s = batch.wait_s;
    rec.fwd_s = r.timing.forward_s;
    rec.bwd_s = r.timing.backward_s;
    rec.opt_s = r.timing.optimizer_s;
    rec.step_s = since(t0);
    rec.tokens = tokens_per_step;
    rec.loss = r.loss_sum / double(tokens_per_step);
    rec.lr = r.lr;
    rec.grad_norm = r.grad_norm;
    const bool last = step + 1 == o.steps;
    if ((o.eval_every > 0 && (step + 1) % o.eval_every == 0) || last) {
      const auto te = Clock::now();
      last_eval = evaluate_holdout(model, data, o.eval_samples);
      if (!last_eval.is_null()) {
        rec.extra = last_eval;
        rec.extra["eval_s"] = since(te);
      }
    }
    step_log.append(rec);
    const double tok_s = double(tokens_per_step) / rec.step_s;
    step_times.push_back(rec.step_s);
    data_times.push_back(rec.data_s);
    fwd_times.push_back(rec.fwd_s);
    bwd_times.push_back(rec.bwd_s);
    opt_times.push_back(rec.opt_s);
    throughputs.push_back(tok_s);
    losses.push_back(rec.loss);
    if ((step + 1) % o.log_every == 0 || last || step == 0) {
      char line[256];
      std::snprintf(line, sizeof(line), "step %lld/%lld | loss %.4f | lr %.3e | grad norm %.4f | %.0f tok/s | MFU %.1f%%%s",
                    (long long)step + 1, (long long)o.steps, rec.loss, rec.lr, rec.grad_norm, tok_s,
                    100.0 * tok_s * flops_per_token / peak,
                    last_eval.is_null() || rec.extra.is_null() ? ""
                        : (" | hold-out " + std::to_string(last_eval["holdout_loss"].get<double>()).substr(0, 6)).c_str());
      log_line_rank0(line);
    }
  }
  const double train_s = since(train_start);

  // Throughput: median step after warm-up (the first step pays for allocation and primitive
  // creation), so short and long runs report the same steady-state figure.
  std::vector<double> steady(step_times.begin() + (step_times.size() > 3 ? 1 : 0), step_times.end());
  const double median_step = SeriesStats::of(steady).median;
  const double throughput = double(tokens_per_step) / median_step;
  const double mfu = throughput * flops_per_token / peak;
  nlohmann::json summary = {
      {"tool", "ddp-train"},
      {"identity", identity.to_json()},
      {"config", run_config},
      {"data", data.describe()},
      {"backend", backend->describe()},
      {"world_size", world},
      {"steps", o.steps},
      {"tokens", tokens_per_step * o.steps},
      {"train_seconds", train_s},
      {"wall_seconds", since(job_start)},
      {"throughput_tokens_per_s", throughput},
      {"median_step_s", median_step},
      {"flops_per_token", flops_per_token},
      {"peak_flops", peak},
      {"mfu", mfu},
      {"first_loss", losses.front()},
      {"final_loss", losses.back()},
      {"per_rank", {{"step_s", SeriesStats::of(step_times).to_json()},
                    {"data_s", SeriesStats::of(data_times).to_json()},
                    {"fwd_s", SeriesStats::of(fwd_times).to_json()},
                    {"bwd_s", SeriesStats::of(bwd_times).to_json()},
                    {"opt_s", SeriesStats::of(opt_times).to_json()},
                    {"tokens_per_s", SeriesStats::of(throughputs).to_json()}}},
      {"eval", last_eval},
      {"step_log", step_log.path()},
  };
  const std::string params_path = o.run_dir + "/params.h5";
  write_parameters(model, params_path);
  summary["params"] = params_path;
  const std::string summary_path = o.run_dir + "/summary.json";
  write_json_file(summary_path, summary);

  char paragraph[1024];
  std::snprintf(paragraph, sizeof(paragraph),
                "summary: trained %lld steps (%s tokens) of a %s-parameter decoder in %.1f s on %s. Loss went "
                "from %.3f to %.3f%s. Steady throughput %.0f tokens/s (median step %.3f s), MFU %.1f%% of the "
                "measured %.1f GFLOP/s matmul peak; data loading took %.2f%% of step time. Step log: %s; "
                "summary: %s.",
                (long long)o.steps, format_count(double(tokens_per_step * o.steps)).c_str(),
                format_count(double(model_config.parameter_count())).c_str(), train_s, backend->describe().c_str(),
                losses.front(), losses.back(),
                last_eval.is_null() ? ""
                    : (", hold-out loss " + std::to_string(last_eval["holdout_loss"].get<double>()).substr(0, 5) +
                       " nats/token").c_str(),
                throughput, median_step, 100.0 * mfu, peak / 1e9,
                100.0 * SeriesStats::of(data_times).median / median_step, step_log.path().c_str(), summary_path.c_str());
  log_line_rank0(paragraph);
  return summary;
}

}  // namespace shardtrain
