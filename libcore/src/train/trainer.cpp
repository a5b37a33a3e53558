// run_training: the training job as its phases, each in its own file, with the state one phase
// hands the next in explicit structs:
//   set-up (job.hpp)            options -> Job: communicator, data, model config, backend, strategy, identity
//   resume (resume.hpp)         Job -> ResumePoint: step, sampler position, checkpoint id
//   step loop (step_loop.hpp)   one step at a time, with checkpoints (checkpoint_saver.hpp) and the
//                               hold-out evaluation (holdout_phase.hpp) -> LoopRecords
//   finish (finish.hpp)         cross-rank measurements, params.h5, summary (rank 0)
// Around them, contract 6 of docs/ARCHITECTURE.md: the phase each rank is in (comm/phase.hpp), its flight record on
// SIGUSR2 or a stop signal, or when it stays in one phase past the collective timeout
// (comm/dump_watcher.hpp), and when it leaves on an error, and the phase
// faults of --inject.
#include "shardtrain/train/trainer.hpp"

#include <optional>
#include <string>

#include "checkpoint_saver.hpp"
#include "finish.hpp"
#include "job.hpp"
#include "resume.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/process_stats.hpp"
#include "shardtrain/base/stop_signals.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/comm/fault_injection.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/comm/dump_watcher.hpp"
#include "shardtrain/data/batch_loader.hpp"
#include "live_metrics_server.hpp"
#include "step_loop.hpp"
#include "tensorboard_log.hpp"

namespace shardtrain {
namespace {

std::string flight_record_path(const TrainOptions& o, int rank) {
  return o.run_dir + "/flight.rank" + std::to_string(rank) + ".json";
}

// The record of a rank leaving on an error (reason "exit"; a timeout's own dump stays the cause).
void dump_on_exit(const TrainOptions& o, const std::string& message, ExitCode code) {
  const std::string path = flight_record_path(o, log_rank());
  try {
    write_flight_record(path, log_rank(), log_world_size(), "exit",
                        {{"error", message}, {"exit_code", static_cast<int>(code)}});
  } catch (const std::exception& e) {
    log_line("flight record NOT written to " + path + ": " + e.what());
  }
}

// Runs `body`; an error escaping it is recorded (once per job: `dumped`) before it propagates
// further, i.e. while everything the caller's scope holds is alive: the job's groups and the
// checkpoint group are still registered, so the record keeps every group's last collectives
// (a dump after the unwinding would find none of them).
template <typename Body>
auto recording_errors(const TrainOptions& o, bool& dumped, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error& e) {
    if (!dumped) dump_on_exit(o, e.what(), e.code());
    dumped = true;
    throw;
  } catch (const std::exception& e) {
    if (!dumped) dump_on_exit(o, e.what(), ExitCode::kInternal);
    dumped = true;
    throw;
  }
}

std::optional<RunSummary> train(const TrainOptions& options, std::optional<DumpWatcher>& dumps, bool& dumped) {
  StartupTimes startup;
  startup.before_job_s = seconds_since_process_start();
  const Stopwatch job_clock;
  set_phase(Phase::kSetup);
  Job job = set_up_job(options);
  startup.setup_s = job_clock.seconds();
  dumps.emplace(flight_record_path(options, job.rank), job.rank, job.world, job.comm->timeout());
  // Each phase runs inside recording_errors, so an error is recorded while the groups it used live.
  return recording_errors(options, dumped, [&]() -> std::optional<RunSummary> {
    const PhaseFaultGuard phase_faults(FaultInjection::parse(options.inject), job.rank);
    // --metrics-port: bound here, at start (a port in use fails the job now), served until the
    // job's end; the step loop publishes into it.
    const std::optional<LiveMetricsServer> live = serve_live_metrics(job);
    // TensorBoard (unless --no-tensorboard): every rank's event folder writable, or exit 2 now.
    check_tensorboard_folders(job);
    set_phase(Phase::kResume);
    const ResumePoint start = resume(job);
    startup.resume_s = job_clock.seconds() - startup.setup_s;
    job.identity.checkpoint_id = start.checkpoint_id;
    if (start.step >= options.schedule.steps) {
      log_nothing_to_do(job, start);
      return std::nullopt;
    }

    set_phase(Phase::kSetup);  // the loop's set-up: the checkpoint group's split, the step log, the peak
    data::BatchLoader loader(job.data, options.schedule.seed, start.sampler, job.model.seq_len,
                             options.schedule.micro_batch, job.grad_accum, job.mesh.dp_rank, job.mesh.dp_size);
    CheckpointSaver saver(job);
    const StopSignals stop_signals;  // from here a SIGTERM or SIGUSR1 saves at the next step boundary
    StepLog step_log(options.run_dir + "/steps.rank" + std::to_string(job.rank) + ".jsonl", job.rank, job.identity);
    // The restart rule on the event files (steps before start.step kept), then this attempt's file.
    std::optional<TensorBoardLog> events;
    if (options.telemetry.tensorboard) events.emplace(job, start.step);
    const MfuBasis mfu = announce_job(job);
    startup.loop_setup_s = job_clock.seconds() - startup.setup_s - startup.resume_s;
    return recording_errors(options, dumped, [&]() -> std::optional<RunSummary> {
      const LoopRecords loop = StepLoop(job, loader, saver, step_log, mfu, live ? live->metrics.get() : nullptr,
                                         events ? &*events : nullptr)
                                    .run(start.step);
      set_phase(Phase::kFinish);
      return finish_job(job, start, loop, step_log, mfu, job_clock, startup);
    });
  });
}

}  // namespace

std::optional<RunSummary> run_training(const TrainOptions& options) {
  forget_flight_triggers();  // a new job (tests run several in one process)
  set_current_step(-1);
  set_phase_history_enabled(options.telemetry.flight_entries > 0);
  const JobSignals signals;                 // SIGUSR2 dumps; a stop signal dumps too (stop_signals.hpp)
  std::optional<DumpWatcher> dumps;  // from the job's set-up on (it knows the rank)
  bool dumped = false;               // the exit record is written (inside train, groups alive)
  try {
    return train(options, dumps, dumped);
  } catch (const Error& e) {
    if (dumps && !dumped) dump_on_exit(options, e.what(), e.code());  // before the set-up: a bad option, nothing to record
    throw;
  } catch (const std::exception& e) {
    if (dumps && !dumped) dump_on_exit(options, e.what(), ExitCode::kInternal);
    throw;
  }
}

}  // namespace shardtrain
