#include "shardtrain/tool/ckpt_reshard.hpp"

#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/ckpt/consolidated.hpp"
#include "shardtrain/ckpt/inspect.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/data/dataset.hpp"
#include "shardtrain/decision/registry.hpp"
#include "shardtrain/ckpt/format.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/model/hf_export.hpp"
#include "shardtrain/model/hf_import.hpp"
#include "shardtrain/parallel/reshard.hpp"

namespace shardtrain {

void check_ckpt_reshard_options(const CkptReshardOptions& o) {
  const bool import = !o.import_format.empty();
  const int modes = int(o.inspect) + int(o.consolidate) + int(!o.export_format.empty()) + int(o.world > 0 && !import) +
                    int(import);
  if (modes != 1)
    throw UsageError("ckpt-reshard: choose exactly one of --world W (reshard), --consolidate, --export hf, "
                     "--import hf DIR, --inspect (see ckpt-reshard --help)");
  if (import) {
    if (o.import_format != "hf")
      throw UsageError("ckpt-reshard: --import " + o.import_format + " is not a format this version reads (hf DIR)");
    if (!o.source.empty()) throw UsageError("ckpt-reshard: --import hf DIR takes no CKPT (the folder is DIR)");
    if (o.out.empty()) throw UsageError("ckpt-reshard: --out is required (the checkpoint directory to create)");
    if (o.world > 0 && o.world % o.tp != 0)
      throw UsageError("ckpt-reshard: --world " + std::to_string(o.world) + " is not a multiple of --tp " + std::to_string(o.tp));
    if (o.dtype != "fp32") throw UsageError("ckpt-reshard: --dtype goes with --export (an import is float32)");
    if (!o.model.empty()) model_preset(o.model);  // an unknown name before any file is read
    return;
  }
  if (!o.model.empty())
    throw UsageError("ckpt-reshard: --model goes with --import hf DIR (a check of config.json's shape); a checkpoint "
                     "records its own shape (--inspect shows it)");
  if (o.source.empty()) throw UsageError("ckpt-reshard: no CKPT given (a step_<N> folder, a --ckpt-dir or a consolidated file)");
  if (!o.inspect && o.out.empty()) throw UsageError("ckpt-reshard: --out is required (it must not exist)");
  if (o.json && !o.inspect) throw UsageError("ckpt-reshard: --json goes with --inspect");
  if (o.tp < 1) throw UsageError("ckpt-reshard: --tp " + std::to_string(o.tp) + " must be at least 1");
  if (o.world > 0 && o.world % o.tp != 0)
    throw UsageError("ckpt-reshard: --world " + std::to_string(o.world) + " is not a multiple of --tp " +
                     std::to_string(o.tp) + " (the mesh is W/T data-parallel ranks of T tensor-parallel ranks)");
  if (o.world == 0 && o.tp != 1) throw UsageError("ckpt-reshard: --tp goes with --world");
  if ((o.world > 0 || o.consolidate) && o.dtype != "fp32")
    throw UsageError("ckpt-reshard: --dtype " + o.dtype + " would lose precision of the optimizer moments (a dtype loss "
                     "on moments); resharding and consolidating copy the state bit for bit, --dtype applies to "
                     "--export only");
  if (o.world == 0 && (o.zero_stage >= 0)) throw UsageError("ckpt-reshard: --zero-stage goes with --world");
  if (o.export_format.empty() && (!o.data.empty() || !o.registry.empty()))
    throw UsageError("ckpt-reshard: --data and --registry go with --export hf");
}

bool ckpt_reshard_needs_mpi(const CkptReshardOptions& o) { return o.world > 0 || !o.import_format.empty(); }

namespace {

int inspect(const CkptReshardOptions& o) {
  const ckpt::Inspection result = ckpt::inspect_checkpoint(o.source);
  if (o.json) std::cout << result.report.dump(2) << std::endl;
  else std::fputs(result.text.c_str(), stdout);
  std::fflush(stdout);  // the report before the error line, in a captured stream too
  if (!result.valid) log_line("ckpt-reshard: " + o.source + " is corrupt: " + result.problem);
  return result.valid ? 0 : int(ExitCode::kFailure);
}

// Consolidate and export refuse a source failing validation with exit 2 (the reshard does too).
std::unique_ptr<ckpt::TensorSource> open_source(const std::string& path) {
  try {
    return ckpt::open_tensor_source(path);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(std::string("the source fails validation: ") + e.what());
  }
}

// The tokenizer of the data the checkpoint trained on: the dataset named with --data (its
// snapshot must be the one the manifest records), else the manifest's "tokenizer" entry.
HfTokenizerInfo tokenizer_of(const ckpt::CheckpointManifest& m, const std::string& data_path, const std::string& where) {
  HfTokenizerInfo t;
  if (!data_path.empty()) {
    const auto reader = data::DatasetReader::open(data_path);
    const auto& h = reader.header();
    const std::string recorded = m.extra.value("dataset_snapshot_id", std::string());
    if (!recorded.empty() && recorded != h.snapshot_id)
      throw UsageError("ckpt-reshard: --data " + data_path + " has dataset snapshot " + h.snapshot_id.substr(0, 12) +
                       ", but " + where + " was trained on " + recorded.substr(0, 12) + "; give the dataset it trained on");
    t.name = h.tokenizer;
    t.vocab = h.vocab;
    t.separator = h.separator_token;
    return t;
  }
  if (!m.extra.contains("tokenizer"))
    throw UsageError("ckpt-reshard: " + where + " does not record its dataset's tokenizer (written before that was "
                     "recorded); give --data DATASET, the dataset file it was trained on");
  return HfTokenizerInfo::from_json(m.extra.at("tokenizer"), "ckpt-reshard: " + where + "'s manifest extra");
}

// The newest release record of the checkpoint (same manifest SHA-256) in --registry.
void find_release(const std::string& registry_dir, const std::string& manifest_sha256, HfExportOptions& options) {
  if (registry_dir.empty()) return;
  if (manifest_sha256.empty()) {
    options.registry_note = "a consolidated file carries no checkpoint identity the registry records";
    return;
  }
  const ReleaseRegistry registry(registry_dir, /*read_only=*/true);
  for (const auto& record : registry.history())
    if (record.artifact.manifest_sha256 == manifest_sha256)
      options.release = model_card_release(record);  // oldest first: the last match is the newest decision
  if (!options.release) options.registry_note = "the registry given has no record of it (never through release-gate)";
}

std::string rate(std::int64_t bytes, double seconds) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f MB in %.2f s (%.2f GB/s)", double(bytes) / 1e6, seconds,
                double(bytes) / 1e9 / std::max(seconds, 1e-9));
  return buf;
}

// --import hf: the folder as a step-0 state, kept in a consolidated file beside --out while the
// resharder writes it for the target layout (default: one rank, DDP), then removed.
int import_hf(const CkptReshardOptions& o, Communicator& comm) {
  const Stopwatch clock;
  std::error_code ec;
  if (std::filesystem::exists(o.out, ec))
    throw UsageError(o.out + ": exists; ckpt-reshard never overwrites: remove it or choose another --out");
  if (comm.size() != 1)
    throw UsageError("ckpt-reshard: run --import as one process (it writes every rank file of --world itself)");
  const std::string staging = o.out + ".import.h5";
  std::filesystem::remove(staging, ec);
  const auto source = import_hf_gpt2(o.import_dir, (o.world > 0 ? o.world : 1) / o.tp, o.model);  // refusals before anything is written
  const std::string identity = source->manifest().extra["imported_from"]["files"].dump();
  struct Remove {
    const std::string& path;
    ~Remove() {
      std::error_code e;
      std::filesystem::remove(path, e);
    }
  } remove{staging};
  ckpt::write_consolidated(*source, staging);
  const ReshardResult r = reshard_checkpoint(staging, o.out, {o.world > 0 ? o.world : 1, o.zero_stage < 0 ? 0 : o.zero_stage, o.tp}, comm);
  log_line("ckpt-reshard: imported " + o.import_dir + " as " + r.folder + " (step 0, fresh AdamW moments, " +
             std::to_string(r.files) + " rank files; source " + identity + "): " + rate(r.bytes_total, clock.seconds()) +
             "; fine-tune with --resume " + r.folder);
  return 0;
}

}  // namespace

int run_ckpt_reshard(const CkptReshardOptions& o) {
  check_ckpt_reshard_options(o);
  if (o.inspect) return inspect(o);
  const Stopwatch clock;
  if (o.consolidate) {
    const auto source = open_source(o.source);
    const std::int64_t bytes = ckpt::write_consolidated(*source, o.out);
    log_line("ckpt-reshard: consolidated " + source->path() + " (step " + std::to_string(source->manifest().step) +
             ", " + std::to_string(source->tensors().size()) + " tensors) into " + o.out + ": " + rate(bytes, clock.seconds()));
    return 0;
  }
  if (!o.export_format.empty()) {
    if (o.export_format != "hf" && o.export_format != "safetensors")
      throw UsageError("ckpt-reshard: --export " + o.export_format +
                       " is not a format this version writes (hf: a Hugging Face folder; safetensors: the same)");
    const auto source = open_source(o.source);
    HfExportOptions options;
    options.dtype = o.dtype == "bf16" ? ExportDType::kBFloat16 : ExportDType::kFloat32;
    options.tokenizer = tokenizer_of(source->manifest(), o.data, source->path());
    if (const auto* folder = dynamic_cast<const ckpt::CheckpointReader*>(source.get()))
      options.manifest_sha256 = folder->manifest_sha256();
    find_release(o.registry, options.manifest_sha256, options);
    const ExportResult r = export_hf_gpt2(*source, o.out, options);
    log_line("ckpt-reshard: exported the " + std::to_string(r.tensors) + " weight tensors of " + source->path() +
             " (step " + std::to_string(source->manifest().step) + ") as GPT-2 " + o.dtype + " to " + r.folder + " (" +
             std::to_string(r.files.size()) + " files" +
             (r.tokenizer_files ? "" : "; no tokenizer files for tokenizer '" + options.tokenizer.name + "': add its own") +
             (options.release ? "; release record: " + std::string(options.release->promote ? "promote" : "reject") : "") +
             "): " + rate(r.bytes, clock.seconds()));
    return 0;
  }
  CommOptions co;
  co.name = "reshard";
  co.on_fatal = mpi_abort_on_fatal();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, co);
  if (!o.import_format.empty()) return import_hf(o, *comm);
  const ReshardResult r = reshard_checkpoint(o.source, o.out, {o.world, o.zero_stage, o.tp}, *comm);
  if (comm->rank() == 0)
    log_line("ckpt-reshard: wrote " + r.folder + " for " + std::to_string(r.files) + " ranks (" +
             std::to_string(comm->size()) + " writing process" + (comm->size() == 1 ? "" : "es") + "): " +
             rate(r.bytes_total, r.seconds) + "; resume with --ckpt-dir " + o.out + " --resume auto");
  char line[200];
  std::snprintf(line, sizeof line, "ckpt-reshard: this process: read %.2f s, write %.2f s, fsync + hashes %.2f s, commit %.2f s",
                r.read_s, r.write_s, r.sync_s, r.commit_s);
  log_line(line);
  return 0;
}

}  // namespace shardtrain
