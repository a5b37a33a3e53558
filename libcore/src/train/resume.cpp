#include "resume.hpp"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "shardtrain/base/log.hpp"
#include "shardtrain/ckpt/ckpt.hpp"

namespace shardtrain {
namespace {

// A checkpoint ckpt-reshard --import wrote (from another toolkit's weights): always a fine-tune start.
bool is_imported(const ckpt::CheckpointManifest& m) { return m.extra.contains("imported_from"); }

// The checks a checkpoint must pass to continue this run (the model is compared as JSON).
ckpt::ReadOptions read_options_for(const Job& job) {
  const TrainOptions& o = job.options;
  ckpt::ReadOptions ro;
  ro.expected_model = job.model.to_json();
  ro.compatible = [&o, &data = job.data](const ckpt::CheckpointManifest& m) -> std::string {
    if (o.checkpoint.fine_tune || is_imported(m)) return "";  // a new run from these weights: only the model must match
    if (m.global_batch != o.schedule.global_batch)
      return "global batch " + std::to_string(m.global_batch) + " in the checkpoint vs --global-batch " +
             std::to_string(o.schedule.global_batch) + " (the global batch stays across resumes; grad_accum adapts)";
    if (m.extra.contains("seed") && m.extra["seed"].get<std::uint64_t>() != o.schedule.seed)
      return "seed " + m.extra["seed"].dump() + " in the checkpoint vs --seed " + std::to_string(o.schedule.seed);
    if (!o.checkpoint.allow_data_change && m.data_snapshot_id != data.selection_snapshot_id())
      return "data selection snapshot " + m.data_snapshot_id.substr(0, 12) + " in the checkpoint vs " +
             data.selection_snapshot_id().substr(0, 12) + " now (another dataset or cutoff); pass "
             "--allow-data-change to continue on the new selection";
    return "";
  };
  return ro;
}

// TEST-ONLY fault switch, the one place it is read: SHARDTRAIN_TEST_FAULT=skip-sampler-restore makes
// a resume keep a fresh sampler instead of the checkpoint's position -- a real loss (the run sees
// its first samples again) that the kill-and-resume proof must catch (its test plants it:
// tests/scripts/kill_resume_planted_loss.sh). Never set it for a real run.
bool test_fault_skip_sampler_restore() {
  const char* fault = std::getenv("SHARDTRAIN_TEST_FAULT");
  return fault != nullptr && std::strcmp(fault, "skip-sampler-restore") == 0;
}

// The position of a restored checkpoint `m` (read from `folder`), logged on rank 0.
ResumePoint resume_point(const Job& job, const std::string& folder, const ckpt::CheckpointManifest& m) {
  ResumePoint start{m.step, {std::uint64_t(m.sampler_epoch), std::uint64_t(m.sampler_consumed)},
                    std::filesystem::path(folder).filename().string()};
  if (job.options.checkpoint.fine_tune || is_imported(m)) {
    log_line_rank0("fine-tuning from " + folder + " (step " + std::to_string(m.step) +
                   (is_imported(m) ? ", imported" : "") + "): its weights and AdamW moments, then step 0 with a fresh "
                   "sampler and LR schedule on this run's data");
    return {0, {}, start.checkpoint_id};
  }
  if (start.sampler.consumed >= job.data.num_train_samples()) {  // only after --allow-data-change
    log_line_rank0("the new data selection has fewer samples than the checkpoint's epoch position: continuing at "
                   "the start of epoch " + std::to_string(start.sampler.epoch + 1));
    start.sampler = {start.sampler.epoch + 1, 0};
  }
  if (test_fault_skip_sampler_restore()) {
    log_line_rank0("TEST FAULT SHARDTRAIN_TEST_FAULT=skip-sampler-restore: the sampler position is NOT restored");
    start.sampler = {};
  }
  log_line_rank0("resumed from " + folder + ": step " + std::to_string(start.step) + ", sampler epoch " +
                 std::to_string(start.sampler.epoch) + " consumed " + std::to_string(start.sampler.consumed) +
                 (m.layout.world_size != job.world
                      ? ", written by " + std::to_string(m.layout.world_size) + " ranks (grad_accum " +
                            std::to_string(m.grad_accum) + " -> " + std::to_string(job.grad_accum) + ")"
                      : std::string()));
  return start;
}

}  // namespace

ResumePoint resume(Job& job) {
  if (job.options.checkpoint.resume.empty()) return {};
  const ckpt::ReadOptions ro = read_options_for(job);
  if (job.options.checkpoint.resume != "auto") {  // a named folder: every rank validates it whole, then reads
    const ckpt::CheckpointReader reader(job.options.checkpoint.resume, ro);
    job.strategy->restore(reader);
    job.strategy->settle_restored();
    return resume_point(job, job.options.checkpoint.resume, reader.manifest());
  }
  // `auto`: the newest valid checkpoint, validated by the ranks together while they read it.
  std::optional<ckpt::CheckpointManifest> restored;
  const ckpt::CollectiveRestore found = ckpt::restore_resume_checkpoint_collective(
      job.ckpt_dir, *job.comm, ro, [&](const ckpt::CheckpointReader& reader) {
        restored.reset();
        job.strategy->restore(reader);
        restored = reader.manifest();
      });
  if (found.folder) {
    job.strategy->settle_restored();
    return resume_point(job, *found.folder, *restored);
  }
  if (found.restored_then_refused) {
    log_line_rank0("resume: the refused checkpoints' reads went into the model's state: building it afresh");
    rebuild_strategy(job);
  }
  log_line_rank0("no valid checkpoint in " + job.ckpt_dir + ": starting from step 0");
  return {};
}

void log_nothing_to_do(const Job& job, const ResumePoint& start) {
  log_line_rank0("the checkpoint is at step " + std::to_string(start.step) + ", at or past --steps " +
                 std::to_string(job.options.schedule.steps) + ": nothing to do");
}

}  // namespace shardtrain
