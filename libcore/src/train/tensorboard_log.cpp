#include "tensorboard_log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"

namespace shardtrain {
namespace fs = std::filesystem;

namespace {

// Creates `folder` and a file in it, then removes the file. "" when that worked, else why not.
std::string try_write_in(const std::string& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return "cannot create the folder (" + ec.message() + ")";
  const std::string probe = folder + "/.write-check." + std::to_string(getpid());
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) return std::string("cannot create a file in it (") + std::strerror(errno) + ")";
  const bool ok = std::fputc('x', f) != EOF && std::fclose(f) == 0;
  fs::remove(probe, ec);
  return ok ? "" : "cannot write a file in it (disk full?)";
}

}  // namespace

std::string tensorboard_root(const std::string& run_dir) { return run_dir + "/tensorboard"; }

std::string tensorboard_rank_folder(const std::string& run_dir, int rank) {
  return tensorboard_root(run_dir) + "/rank_" + std::to_string(rank);
}

void check_tensorboard_folders(const Job& job) {
  if (!job.options.telemetry.tensorboard) return;
  const std::string folder = tensorboard_rank_folder(job.options.run_dir, job.rank);
  const std::string why = try_write_in(folder);
  const std::string root = tensorboard_root(job.options.run_dir);
  std::exception_ptr mine;
  if (!why.empty())
    mine = std::make_exception_ptr(UsageError(folder + ": cannot write TensorBoard event files here: " + why +
                                              "; make " + root + " a writable folder, or pass --no-tensorboard"));
  rethrow_together(job, mine,
        "another rank cannot write its TensorBoard folder under " + root +
            " (its line names it); make the folder writable, or pass --no-tensorboard");
}

TensorBoardLog::TensorBoardLog(const Job& job, std::int64_t first_step) : job_scalars_(job.rank == 0) {
  const std::string run_dir = job.options.run_dir;
  std::exception_ptr mine;
  TensorBoardTruncation dropped;
  try {
    const auto add = [&dropped](const TensorBoardTruncation& t) {
      dropped.files_rewritten += t.files_rewritten;
      dropped.files_removed += t.files_removed;
      dropped.records_dropped += t.records_dropped;
      dropped.torn_tails += t.torn_tails;
    };
    add(keep_tensorboard_steps_before(tensorboard_rank_folder(run_dir, job.rank), first_step));
    if (job.rank == 0) {  // the folders of ranks this job does not have (an earlier attempt on more ranks)
      static const std::regex kRankFolder(R"(rank_(\d{1,9}))");  // not a rank past int: not ours
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(tensorboard_root(run_dir), ec)) {
        std::smatch m;
        const std::string name = entry.path().filename().string();
        if (entry.is_directory() && std::regex_match(name, m, kRankFolder) && std::stoll(m[1].str()) >= job.world)
          add(keep_tensorboard_steps_before(entry.path().string(), first_step));
      }
      if (ec) throw IoError(tensorboard_root(run_dir) + ": cannot list the TensorBoard folder (" + ec.message() + ")");
    }
    writer_.emplace(tensorboard_rank_folder(run_dir, job.rank), job.rank);
  } catch (const Error&) {
    mine = std::current_exception();
  }
  rethrow_together(job, mine,
        "another rank could not prepare its TensorBoard event files under " + tensorboard_root(run_dir) +
            " (its line says why); fix or remove them, or pass --no-tensorboard");
  if (dropped.records_dropped > 0 || dropped.torn_tails > 0)
    log_line("tensorboard: dropped " + std::to_string(dropped.records_dropped) + " records of steps >= " +
             std::to_string(first_step) + (dropped.torn_tails ? " and " + std::to_string(dropped.torn_tails) +
                                                                    " torn last records" : std::string()) +
             " left by an earlier attempt (" + std::to_string(dropped.files_rewritten) + " files rewritten, " +
             std::to_string(dropped.files_removed) + " removed)");
  log_line_rank0("tensorboard: every rank writes its events to " + tensorboard_root(run_dir) +
                 "/rank_<R>/ (view: tensorboard --logdir " + tensorboard_root(run_dir) + ")");
}

void TensorBoardLog::write(const StepRecord& record) {
  if (!writer_) return;
  try {
    writer_->write_step(record.step, tensorboard_step_scalars(record, job_scalars_));
  } catch (const Error& e) {
    log_line(std::string("warning: ") + e.what() + "; this rank writes no more TensorBoard events in this run "
             "(training, the step log and the checkpoints go on)");
    writer_.reset();
  }
}

}  // namespace shardtrain
