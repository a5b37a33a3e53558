#include "checkpoint_saver.hpp"

#include <utility>

#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/model/hf_export.hpp"
#include "shardtrain/model/train_state.hpp"

namespace shardtrain {

CheckpointSaver::CheckpointSaver(Job& job) : job_(job), ckpt_tensors_(checkpoint_tensors(job.strategy->registry())) {
  save_options_.keep = job.options.checkpoint.keep;
  if (!job.options.checkpoint.async) {
    ckpt_comm_ = job.comm->split(0, job.rank, "ckpt", Phase::kCheckpoint);
    return;
  }
  async_writer_ = std::make_unique<ckpt::AsyncCheckpointWriter>(job.ckpt_dir, *job.comm, save_options_);
  std::size_t bytes = 0;
  for (const auto& piece : job.strategy->checkpoint_pieces()) bytes += std::size_t(piece.count) * sizeof(float);
  async_writer_->reserve(bytes);
}

ckpt::CheckpointManifest CheckpointSaver::manifest_after(std::int64_t completed, const data::SamplerState& state,
                                                         double lr) const {
  const TrainOptions& o = job_.options;
  ckpt::CheckpointManifest m;
  m.step = completed;
  m.tokens_seen = completed * job_.tokens_per_step();
  m.model = job_.model.to_json();
  m.config = job_.run_config;
  m.layout = {job_.world, job_.mesh.dp_size, job_.mesh.tp_size, job_.strategy->zero_stage()};
  m.global_batch = o.schedule.global_batch;
  m.micro_batch = o.schedule.micro_batch;
  m.grad_accum = job_.grad_accum;
  m.sampler_epoch = std::int64_t(state.epoch);
  m.sampler_consumed = std::int64_t(state.consumed);
  m.rng = {{"seed", o.schedule.seed},
           {"init", "philox4x32-10(seed, fnv1a64(tensor name), element index): stateless"},
           {"sampler", "feistel permutation keyed by (seed, epoch): state is (epoch, consumed)"}};
  m.lr_step = completed;
  m.lr = lr;
  m.data_snapshot_id = job_.data.selection_snapshot_id();
  m.data_cutoff = o.data.cutoff.value_or("");
  m.extra = {{"seed", o.schedule.seed},
             {"config_hash", job_.identity.config_hash},
             {"dataset_snapshot_id", job_.data.dataset_snapshot_id()},
             {"tokenizer",  // what an export needs to describe the token ids (ckpt-reshard --export hf)
              HfTokenizerInfo{job_.data.tokenizer(), job_.data.vocab(), job_.data.separator_token()}.to_json()},
             {"eval_from", o.data.eval_from.value_or("")},
             {"optimizer", o.optimizer.to_json()}};
  return m;
}

double CheckpointSaver::save(std::int64_t completed, const data::SamplerState& state, double lr) {
  const ckpt::CheckpointManifest m = manifest_after(completed, state, lr);
  const auto pieces = job_.strategy->checkpoint_pieces();
  const Stopwatch stall;
  const PhaseScope phase(Phase::kCheckpoint);
  if (async_writer_) {
    async_writer_->save(m, ckpt_tensors_, pieces);
  } else {
    ckpt_comm_->set_step(job_.comm->step());
    committed_ = ckpt::save_checkpoint(job_.ckpt_dir, m, ckpt_tensors_, pieces, *ckpt_comm_, save_options_);  // logs the commit
  }
  return stall.seconds();
}

void CheckpointSaver::poll() {
  if (!async_writer_) return;
  if (auto done = async_writer_->poll()) committed_ = std::move(done);
}

void CheckpointSaver::wait() {
  if (!async_writer_) return;
  if (auto done = async_writer_->wait()) committed_ = std::move(done);
}

std::optional<ckpt::SaveResult> CheckpointSaver::take_committed() { return std::exchange(committed_, std::nullopt); }

}  // namespace shardtrain
