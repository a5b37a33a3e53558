#include "shardtrain/tool/ckpt_reshard.hpp"

#include <mpi.h>

#include <cstdio>
#include <iostream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/ckpt/consolidated.hpp"
#include "shardtrain/ckpt/inspect.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/model/hf_export.hpp"
#include "shardtrain/parallel/reshard.hpp"

namespace shardtrain {

void check_ckpt_reshard_options(const CkptReshardOptions& o) {
  const int modes = int(o.inspect) + int(o.consolidate) + int(!o.export_format.empty()) + int(o.world > 0);
  if (modes != 1)
    throw UsageError("ckpt-reshard: choose exactly one of --world W (reshard), --consolidate, --export safetensors, "
                     "--inspect (see ckpt-reshard --help)");
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
}

bool ckpt_reshard_needs_mpi(const CkptReshardOptions& o) { return o.world > 0; }

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

std::string rate(std::int64_t bytes, double seconds) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f MB in %.2f s (%.2f GB/s)", double(bytes) / 1e6, seconds,
                double(bytes) / 1e9 / std::max(seconds, 1e-9));
  return buf;
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
    if (o.export_format != "safetensors")
      throw UsageError("ckpt-reshard: --export " + o.export_format + " is not a format this version writes (safetensors)");
    const auto source = open_source(o.source);
    const ExportResult r = export_hf_gpt2(*source, o.out, o.dtype == "bf16" ? ExportDType::kBFloat16 : ExportDType::kFloat32);
    log_line("ckpt-reshard: exported the " + std::to_string(r.tensors) + " weight tensors of " + source->path() +
             " (step " + std::to_string(source->manifest().step) + ") as GPT-2 " + o.dtype + " to " + r.safetensors_path +
             " and " + r.config_path + ": " + rate(r.bytes, clock.seconds()));
    return 0;
  }
  CommOptions co;
  co.name = "reshard";
  co.on_fatal = mpi_abort_on_fatal();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, co);
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
