// The training job's third phase, the step loop: from the resume point to --steps (or to the
// step at which a stop signal arrived anywhere), one optimizer step at a time through the
// strategy, with the periodic replica check, checkpoint, hold-out evaluation, step-log record,
// TensorBoard events and progress line of each step.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_saver.hpp"
#include "job.hpp"
#include "tensorboard_log.hpp"
#include "shardtrain/train/live_metrics.hpp"
#include "shardtrain/data/batch_loader.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain {

// What the step loop hands to the finish phase.
struct LoopRecords {
  std::vector<StepRecord> records;      // this rank's steps, in order (as written to the step log)
  std::optional<HoldoutLoss> last_eval;  // the last hold-out evaluation (rank 0; empty when none)
  bool stopped_by_signal = false;       // a stop signal ended the run early (its step saved)
  double train_s = 0;                   // from the synchronised start to the last save's end
};

class StepLoop {
 public:
  // Everything is borrowed and must outlive the loop; `metrics` (--metrics-port) and `events`
  // (TensorBoard, off with --no-tensorboard) may be null.
  StepLoop(Job& job, data::BatchLoader& loader, CheckpointSaver& saver, StepLog& step_log, const MfuBasis& mfu,
           LiveMetrics* metrics = nullptr, TensorBoardLog* events = nullptr);

  // Collective: runs steps first_step .. options.steps - 1 (run_one_step each), stopping after a
  // step at which any rank received a stop signal; then waits for a background save in flight.
  // Call it once: it hands its records over.
  LoopRecords run(std::int64_t first_step);

 private:
  // One step, on every rank in lockstep: the batch, the optimizer step, the replica check when
  // due, the communication columns, the stop agreement, the checkpoint when due (or stopping),
  // the hold-out evaluation when due, the step-log record, its TensorBoard events and the
  // progress line. Returns true when every rank stops after this step.
  bool run_one_step(std::int64_t step);
  // The step log's comm_total_s, comm_cpu_s and peers: the communicator's totals since the last step.
  void charge_communication(StepRecord& record);
  // Collective: whether a stop signal arrived on any rank, so that all save the same step.
  bool every_rank_stops();
  // The finished step (and a checkpoint committed since the last) to the live metrics, if served.
  void publish(const StepRecord& record, const std::optional<StragglerReport>& stragglers);
  // Rank 0's progress line of a step (every --log-every steps, the first and the last).
  void print_step_line(const StepRecord& record) const;

  Job& job_;
  data::BatchLoader& loader_;
  CheckpointSaver& saver_;
  StepLog& step_log_;
  const MfuBasis mfu_;
  LiveMetrics* metrics_;
  TensorBoardLog* events_;
  double comm_busy_before_ = 0, comm_cpu_before_ = 0;
  double tp_busy_before_ = 0, tp_wait_before_ = 0;
  std::map<int, PeerStats> peers_before_;  // the DP group's per-peer totals at the last step's end
  LoopRecords out_;
};

}  // namespace shardtrain
