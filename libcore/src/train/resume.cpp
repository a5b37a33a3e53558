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

// The folder to resume from: the named one, or (auto) the newest valid one in the job's
// checkpoint folder as rank 0 chose it -- which then needs no second hashing on any rank.
std::optional<std::string> checkpoint_to_resume(const Job& job, ckpt::ReadOptions& ro) {
  if (job.options.checkpoint.resume != "auto") return job.options.checkpoint.resume;
  std::optional<std::string> folder = ckpt::find_resume_checkpoint_collective(job.ckpt_dir, *job.comm, ro);
  ro.verify_files = false;  // rank 0 just validated it
  return folder;
}

// TEST-ONLY fault switch, the one place it is read: SHARDTRAIN_TEST_FAULT=skip-sampler-restore makes
// a resume keep a fresh sampler instead of the checkpoint's position -- a real loss (the run sees
// its first samples again) that the kill-and-resume proof must catch (its test plants it:
// tests/scripts/kill_resume_planted_loss.sh). Never set it for a real run.
bool test_fault_skip_sampler_restore() {
  const char* fault = std::getenv("SHARDTRAIN_TEST_FAULT");
  return fault != nullptr && std::strcmp(fault, "skip-sampler-restore") == 0;
}

// Restores the strategy from a validated checkpoint; returns its position, logged on rank 0.
ResumePoint restore_from(Job& job, const std::string& folder, const ckpt::ReadOptions& ro) {
  ckpt::CheckpointReader reader(folder, ro);
  job.strategy->restore(reader);
  const auto& m = reader.manifest();
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
  ckpt::ReadOptions ro = read_options_for(job);
  const std::optional<std::string> folder = checkpoint_to_resume(job, ro);
  if (folder) return restore_from(job, *folder, ro);
  log_line_rank0("no valid checkpoint in " + job.ckpt_dir + ": starting from step 0");
  return {};
}

void log_nothing_to_do(const Job& job, const ResumePoint& start) {
  log_line_rank0("the checkpoint is at step " + std::to_string(start.step) + ", at or past --steps " +
                 std::to_string(job.options.schedule.steps) + ": nothing to do");
}

}  // namespace shardtrain
