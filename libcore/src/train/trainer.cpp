// run_training: the training job as its phases, each in its own file, with the state one phase
// hands the next in explicit structs:
//   set-up (job.hpp)            options -> Job: communicator, data, model config, backend, strategy, identity
//   resume (resume.hpp)         Job -> ResumePoint: step, sampler position, checkpoint id
//   step loop (step_loop.hpp)   one step at a time, with checkpoints (checkpoint_saver.hpp) and the
//                               hold-out evaluation (holdout_phase.hpp) -> LoopRecords
//   finish (finish.hpp)         cross-rank measurements, params.h5, summary (rank 0)
#include "shardtrain/train/trainer.hpp"

#include <string>

#include "checkpoint_saver.hpp"
#include "finish.hpp"
#include "job.hpp"
#include "resume.hpp"
#include "shardtrain/base/stop_signals.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/data/batch_loader.hpp"
#include "step_loop.hpp"

namespace shardtrain {

nlohmann::json run_training(const TrainOptions& options) {
  const Stopwatch job_clock;
  // The phase each rank is in, stamped on every collective's flight record (comm/phase.hpp).
  set_phase(Phase::kSetup);
  Job job = set_up_job(options);
  set_phase(Phase::kResume);
  const ResumePoint start = resume(job);
  job.identity.checkpoint_id = start.checkpoint_id;
  if (start.step >= options.steps) return nothing_to_do(job, start);

  set_phase(Phase::kSetup);  // the loop's set-up: the checkpoint group's split, the step log, the peak
  data::BatchLoader loader(job.data, options.seed, start.sampler, job.model.seq_len, options.micro_batch,
                           job.grad_accum, job.rank, job.world);
  CheckpointSaver saver(job);
  const StopSignals stop_signals;  // from here a SIGTERM or SIGUSR1 saves at the next step boundary
  StepLog step_log(options.run_dir + "/steps.rank" + std::to_string(job.rank) + ".jsonl", job.rank, job.identity);
  const MfuBasis mfu = announce_job(job);

  const LoopRecords loop = StepLoop(job, loader, saver, step_log, mfu).run(start.step);
  set_phase(Phase::kFinish);
  return finish_job(job, start, loop, step_log, mfu, job_clock);
}

}  // namespace shardtrain
