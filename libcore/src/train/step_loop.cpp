#include "step_loop.hpp"

#include "shardtrain/parallel/tensor_parallel.hpp"

#include <cstdio>
#include <string>

#include "holdout_phase.hpp"
#include "straggler_watch.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stop_signals.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/parallel/replicas.hpp"

namespace shardtrain {
namespace {

// The step's columns the strategy measured.
StepRecord record_of(std::int64_t step, double data_s, const StepResult& r) {
  StepRecord rec;
  rec.step = step;
  rec.data_s = data_s;
  rec.fwd_s = r.timing.forward_s;
  rec.bwd_s = r.timing.backward_s;
  rec.comm_exposed_s = r.timing.comm_exposed_s;
  rec.opt_s = r.timing.optimizer_s;
  return rec;
}

bool checkpoint_due(const TrainOptions& o, std::int64_t step, bool last_step) {
  const int every = o.checkpoint.every;
  return every > 0 && ((step + 1) % every == 0 || last_step);
}

}  // namespace

StepLoop::StepLoop(Job& job, data::BatchLoader& loader, CheckpointSaver& saver, StepLog& step_log, const MfuBasis& mfu,
                   LiveMetrics* metrics, TensorBoardLog* events)
    : job_(job), loader_(loader), saver_(saver), step_log_(step_log), mfu_(mfu), metrics_(metrics), events_(events) {}

LoopRecords StepLoop::run(std::int64_t first_step) {
  // Step 0's communication columns count from here: the set-up's and the resume's collectives on
  // this group (the split, the resume verdict, which waits for rank 0's validation) stay out.
  const CommStats before = job_.mesh.dp->stats();
  comm_busy_before_ = before.total_busy_s();
  comm_cpu_before_ = before.total_cpu_s();
  peers_before_ = before.peer_totals();
  if (job_.mesh.tp) {
    const CommStats tp = job_.mesh.tp->stats();
    tp_busy_before_ = tp.total_busy_s();
    tp_wait_before_ = tp.wait_s;
  }
  job_.comm->barrier();  // start the clocks together
  const Stopwatch train_clock;
  for (std::int64_t step = first_step; step < job_.options.schedule.steps; ++step) {
    if (run_one_step(step)) {
      out_.stopped_by_signal = true;
      break;
    }
  }
  saver_.wait();
  if (metrics_)
    if (auto c = saver_.take_committed()) metrics_->record_checkpoint(c->step, c->total_s, c->bytes_local);
  out_.train_s = train_clock.seconds();
  return std::move(out_);
}

bool StepLoop::run_one_step(std::int64_t step) {
  const TrainOptions& o = job_.options;
  const Stopwatch step_clock;
  job_.comm->set_step(step);  // every group's records carry the step (and --inject step= matches it)
  if (job_.mesh.dp != job_.comm.get()) job_.mesh.dp->set_step(step);
  if (job_.mesh.tp) job_.mesh.tp->set_step(step);
  set_current_step(step);
  const Stopwatch data_clock;  // the whole data phase: the prefetch wait and anything else the rank does there
  set_phase(Phase::kData);
  auto batch = loader_.next();
  const double data_s = data_clock.seconds();
  const StepResult r = job_.strategy->run_step(step, batch.tokens.data(), job_.grad_accum, o.schedule.micro_batch,
                                               double(job_.tokens_per_step()));
  StepRecord rec = record_of(step, data_s, r);
  set_phase(Phase::kStepEnd);
  const int check_every = o.telemetry.check_replicas;
  if (check_every > 0 && (step + 1) % check_every == 0) {
    const std::vector<float> params = job_.strategy->replicated_parameters();
    check_replicas(*job_.mesh.dp, job_.strategy->registry(), params, step);  // along the DP axis
    if (job_.mesh.tp) check_tensor_parallel_replicas(*job_.mesh.tp, job_.strategy->registry(), params, step);
  }
  charge_communication(rec);
  saver_.poll();
  const bool stop = every_rank_stops();
  const bool last_step = step + 1 == o.schedule.steps;
  if (stop || checkpoint_due(o, step, last_step)) rec.ckpt_s = saver_.save(step + 1, batch.state_after, r.lr);
  rec.step_s = step_clock.seconds();
  rec.tokens = job_.rank_tokens_per_step();
  rec.loss = r.loss_sum / double(job_.tokens_per_step());
  rec.lr = r.lr;
  rec.grad_norm = r.grad_norm;
  rec.tokens_per_s = double(job_.tokens_per_step()) / rec.step_s;
  rec.mfu = mfu_.mfu(rec.tokens_per_s, job_.world);
  const bool last = last_step || stop;
  if (evaluation_due(o, step, last)) {
    const HoldoutEvaluation evaluation = evaluate_current_model(job_);
    out_.last_eval = evaluation.result;
    if (evaluation.result) {
      rec.extra = json_fields::write(*evaluation.result);
      rec.extra["eval_s"] = evaluation.seconds;
    }
  }
  step_log_.append(rec);
  if (events_) events_->write(rec);
  out_.records.push_back(rec);
  std::optional<StragglerReport> stragglers;
  if ((step + 1) % o.telemetry.log_every == 0 || last || step == 0) {
    print_step_line(rec);
    stragglers = log_live_stragglers(job_, out_.records);  // collective: every rank logs at the same steps
  }
  if (metrics_) publish(rec, stragglers);
  if (stop)
    log_line_rank0("stop signal: saved step " + std::to_string(step + 1) + " and stopping; resume with --resume auto");
  return stop;
}

// The data-parallel group's collectives (gradient sums, ZeRO gathers) into comm_*, the TP group's
// into tp_*.
void StepLoop::charge_communication(StepRecord& rec) {
  const CommStats stats = job_.mesh.dp->stats();
  rec.comm_total_s = stats.total_busy_s() - comm_busy_before_;
  rec.comm_cpu_s = stats.total_cpu_s() - comm_cpu_before_;
  comm_busy_before_ = stats.total_busy_s();
  comm_cpu_before_ = stats.total_cpu_s();
  for (const auto& [peer, p] : stats.peer_totals()) {
    const PeerStats before = peers_before_.count(peer) ? peers_before_[peer] : PeerStats{};
    if (p.bytes > before.bytes) rec.peers[peer] = PeerTransfer{p.bytes - before.bytes, p.seconds - before.seconds};
    peers_before_[peer] = p;
  }
  if (!job_.mesh.tp) return;
  const CommStats tp = job_.mesh.tp->stats();
  rec.tp_comm_s = tp.total_busy_s() - tp_busy_before_;
  rec.tp_exposed_s = tp.wait_s - tp_wait_before_;
  tp_busy_before_ = tp.total_busy_s();
  tp_wait_before_ = tp.wait_s;
}

bool StepLoop::every_rank_stops() {
  std::int32_t stop = StopSignals::received() != 0 ? 1 : 0;
  if (job_.world > 1) job_.comm->all_reduce(&stop, 1);
  return stop != 0;
}

void StepLoop::publish(const StepRecord& rec, const std::optional<StragglerReport>& stragglers) {
  metrics_->record_step(rec, rec.tokens_per_s, rec.mfu);
  metrics_->record_memory(job_.strategy->memory_report());
  if (stragglers) metrics_->record_stragglers(*stragglers);
  if (auto c = saver_.take_committed()) metrics_->record_checkpoint(c->step, c->total_s, c->bytes_local);
}

void StepLoop::print_step_line(const StepRecord& rec) const {
  const std::string holdout =
      rec.extra.is_null() ? "" : " | hold-out " + std::to_string(rec.extra["holdout_loss"].get<double>()).substr(0, 6);
  // MFU is capped at 100%; a step faster than the peak allows says so instead of printing more.
  const char* exceeded = mfu_.ratio(rec.tokens_per_s, job_.world) > 1.0 ? " (above the peak: see the summary's mfu_peak)" : "";
  char line[360];
  std::snprintf(line, sizeof(line), "step %lld/%lld | loss %.4f | lr %.3e | grad norm %.4f | %.0f tok/s | MFU %.1f%%%s%s",
                (long long)rec.step + 1, (long long)job_.options.schedule.steps, rec.loss, rec.lr, rec.grad_norm, rec.tokens_per_s,
                100.0 * rec.mfu, exceeded, holdout.c_str());
  log_line_rank0(line);
}

}  // namespace shardtrain
