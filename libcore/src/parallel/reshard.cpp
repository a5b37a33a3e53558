#include "shardtrain/parallel/reshard.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/ckpt/consolidated.hpp"
#include "shardtrain/comm/string_collectives.hpp"
#include "shardtrain/model/train_state.hpp"
#include "shardtrain/parallel/layout_plan.hpp"

namespace fs = std::filesystem;

namespace shardtrain {
namespace {

std::unique_ptr<ckpt::TensorSource> open_validated(const std::string& path, bool verify_files) {
  ckpt::ReadOptions ro;
  ro.verify_files = verify_files;
  try {
    return ckpt::open_tensor_source(path, ro);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(std::string("the source fails validation: ") + e.what() +
                     " (ckpt-reshard rewrites only valid checkpoints)");
  }
}

}  // namespace

void check_reshard_target(const ckpt::TensorSource& source, const StateLayout& target) {
  target.validate();
  const auto& m = source.manifest();
  const ModelConfig config = ModelConfig::from_json(m.model);
  // The target must be a layout some backend runs (the planner's answer; a checkpoint belongs to
  // no device): refused only when every backend refuses it, with the first backend's reason.
  std::optional<LayoutDecision> refused;
  for (const auto& [name, device] : kDeviceKindNames) {
    LayoutRequest r;
    r.model = config;
    r.world = target.world;
    r.tp = target.tp;
    r.zero_stage = target.zero_stage;
    r.capabilities = backend_capabilities(device);
    r.micro_batch = int(std::max<std::int64_t>(1, m.micro_batch));
    r.global_batch = m.global_batch;
    LayoutDecision d = plan_layout(r);
    if (d.accepted()) {
      refused.reset();
      break;
    }
    if (!refused) refused = std::move(d);
  }
  if (refused) refused->value();  // throws its LayoutRefused
  if (m.micro_batch < 1 || m.global_batch % (m.micro_batch * target.dp()) != 0)
    throw UsageError("target world size " + std::to_string(target.world) + " (" + std::to_string(target.dp()) +
                     " data-parallel ranks): the global batch " + std::to_string(m.global_batch) +
                     " is not a multiple of micro-batch " + std::to_string(m.micro_batch) + " x " +
                     std::to_string(target.dp()) +
                     " (contract 1 of docs/ARCHITECTURE.md), so no job could resume this state there; pick a data-parallel size dividing " +
                     std::to_string(m.micro_batch > 0 ? m.global_batch / m.micro_batch : 0));
  const ParameterRegistry registry(config);
  const auto specs = checkpoint_tensors(registry);
  for (const auto& spec : specs) {
    const ckpt::TensorInfo* info = source.find(spec.name);
    if (!info)
      throw UsageError(source.path() + ": no tensor '" + spec.name + "', which the model in its manifest has; "
                       "the checkpoint is incomplete or not a training state");
    if (info->spec.dtype != spec.dtype)
      throw UsageError(source.path() + ": tensor '" + spec.name + "' is " + dtype_name(info->spec.dtype) +
                       ", the trainers' state is " + dtype_name(spec.dtype) +
                       "; ckpt-reshard copies bits and never converts (a conversion would lose moment precision)");
    if (info->spec.shape != spec.shape)
      throw UsageError(source.path() + ": tensor '" + spec.name + "' has another shape than the model in its manifest");
  }
  if (source.tensors().size() != specs.size())
    throw UsageError(source.path() + ": holds " + std::to_string(source.tensors().size()) + " tensors, the model's state " +
                     std::to_string(specs.size()) + "; ckpt-reshard would drop the others, so it refuses");
}

namespace {

// Rank 0 refuses an existing `out` and validates the source against `target` (whose zero_stage < 0
// it resolves to the source's); its verdict, and the resolved source path, go to every rank, which
// then opens the same source. Structure, sizes and coverage only: the file hashes are the commit's.
std::unique_ptr<ckpt::TensorSource> open_agreed_source(const std::string& source_path, const std::string& out,
                                                       StateLayout& target, Communicator& comm) {
  std::unique_ptr<ckpt::TensorSource> source;
  std::string resolved;
  if (comm.rank() == 0) {
    try {
      std::error_code ec;
      if (fs::exists(out, ec))
        throw UsageError(out + ": exists; ckpt-reshard never writes into an existing folder: remove it or choose "
                         "another --out");
      source = open_validated(source_path, false);  // structure, sizes, coverage; the hashes below
      if (target.zero_stage < 0) target.zero_stage = source->manifest().layout.zero_stage;
      check_reshard_target(*source, target);
      resolved = "OK:" + source->path();
    } catch (const std::exception& e) {
      resolved = encode_error(e);
    }
  }
  broadcast_string(resolved, comm);
  if (resolved.rfind("OK:", 0) != 0) throw_encoded(resolved);
  if (comm.rank() != 0) {
    source = open_validated(resolved.substr(3), false);
    if (target.zero_stage < 0) target.zero_stage = source->manifest().layout.zero_stage;
  }
  return source;
}

// The pieces of one target rank file, read from the source into one buffer (reused: valid until
// the next call, as save_checkpoint_files's pieces_of promises).
struct TargetFileReader {
  ckpt::TensorSource& source;
  const std::vector<ParameterRegistry>& local_registries;  // per TP position: rank file r is shard r % tp
  const StateLayout& target;
  const std::vector<ParameterInfo>& tensors;
  std::vector<float> buffer;
  double read_s = 0;

  std::vector<ckpt::PieceView> pieces_of(int file) {
    const auto owned = owned_state_pieces(local_registries[std::size_t(file % target.tp)], target, file);
    std::size_t total = 0;
    for (const auto& p : owned) total += std::size_t(p.count);
    buffer.resize(total);
    std::vector<ckpt::PieceView> pieces;
    std::size_t at = 0;
    const Stopwatch read_clock;
    for (const auto& p : owned) {
      const std::string name = state_tensor_prefix(p.kind) + tensors[p.tensor].name;
      source.read_range(name, p.offset, p.count, buffer.data() + at);
      pieces.push_back({name, p.offset, p.count, buffer.data() + at});
      at += std::size_t(p.count);
    }
    read_s += read_clock.seconds();
    char line[160];
    std::snprintf(line, sizeof line, "ckpt-reshard: rank file %d of %d: %zu pieces, %.1f MB read in %.2f s; writing",
                  file + 1, target.world, pieces.size(), double(total * sizeof(float)) / 1e6, read_clock.seconds());
    log_line(line);
    return pieces;
  }
};

}  // namespace

ReshardResult reshard_checkpoint(const std::string& source_path, const std::string& out, const StateLayout& requested,
                                 Communicator& comm) {
  const Stopwatch clock;
  StateLayout target = requested;  // zero_stage < 0: the source's, resolved once it is open
  const std::unique_ptr<ckpt::TensorSource> source = open_agreed_source(source_path, out, target, comm);

  const auto& m0 = source->manifest();
  const ModelConfig config = ModelConfig::from_json(m0.model);
  const ParameterRegistry registry(config);
  // Each TP position's local registry: rank file r holds TP shard r % tp (state_layout.hpp).
  std::vector<ParameterRegistry> local_registries;
  for (int t = 0; t < target.tp; ++t) local_registries.emplace_back(config, TensorParallelPlace{target.tp, t});
  const auto specs = checkpoint_tensors(registry);
  ckpt::CheckpointManifest manifest = m0;
  manifest.record_rewrite("reshard", source->path());
  manifest.layout = {target.world, target.dp(), target.tp, target.zero_stage};
  manifest.grad_accum = m0.global_batch / (m0.micro_batch * target.dp());
  manifest.code_version.clear();  // the writer records this build; the history keeps the source's
  ckpt::SaveOptions options;
  options.keep = 0;
  std::int64_t tensor_bytes = 0;
  for (const auto& spec : specs) {
    options.expected_checksums[spec.name] = source->at(spec.name).checksum;
    tensor_bytes += spec.bytes();
  }

  // Rank 0 hashes every source rank file (SHA-256 against the manifest) while the target files are
  // written, and the commit waits for that verdict: a source failing it is refused (UsageError,
  // the file named) and nothing is committed. The data itself is checked end to end by the sum64s.
  std::future<std::vector<std::string>> hashes;
  const auto* folder = dynamic_cast<const ckpt::CheckpointReader*>(source.get());
  if (comm.rank() == 0 && folder)
    hashes = std::async(std::launch::async, [folder] { return ckpt::check_rank_files(folder->folder(), folder->manifest()); });
  options.before_commit = [&] {
    if (!hashes.valid()) return;
    const auto verdicts = hashes.get();
    for (std::size_t i = 0; i < verdicts.size(); ++i)
      if (verdicts[i] != "OK")
        throw UsageError("the source fails validation: " +
                         (fs::path(folder->folder()) / folder->manifest().files[i].name).string() + ": " + verdicts[i] +
                         " (ckpt-reshard rewrites only valid checkpoints; nothing was written)");
  };

  TargetFileReader reader{*source, local_registries, target, registry.tensors(), {}, 0};
  ckpt::SaveResult saved;
  try {
    saved = ckpt::save_checkpoint_files(out, manifest, specs, target.world,
                                        [&](int file) { return reader.pieces_of(file); }, comm, options);
  } catch (...) {
    if (comm.rank() == 0) {  // `out` did not exist before: leave nothing behind
      std::error_code ec;
      fs::remove_all(out, ec);
    }
    throw;
  }
  ReshardResult result;
  result.folder = saved.path;
  result.files = target.world;
  result.tensor_bytes = tensor_bytes;
  result.bytes_total = saved.bytes_total;
  result.seconds = clock.seconds();
  result.read_s = reader.read_s;
  result.write_s = saved.write_s;
  result.sync_s = saved.sync_s;
  result.commit_s = saved.commit_s;
  return result;
}

}  // namespace shardtrain
