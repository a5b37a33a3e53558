// One owner per run folder. Two jobs on one --run-dir interleave their step logs and share a
// checkpoint's temporary folder, silently mixing two runs' records; on a cluster that happens
// without a double submission (a requeued job starting while the old allocation's ranks still
// write, on another node). So a run folder has one owner: a lock file, RUN_DIR/owner.lock
// (docs/FORMATS.md, "The run folder's owner"), naming the owner's Slurm job, host and pid, created
// with O_CREAT | O_EXCL (atomic on a shared file system, NFS included). A second job on the folder
// is refused while the owner lives; an owner that is gone (its pid ended on this host, or its
// Slurm job or job step no longer runs) is taken over, and the log says so.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_record.hpp"

#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

// Who owns (or wants) a run folder.
struct RunFolderOwnerRecord {
  std::string job_id;   // SLURM_JOB_ID; "" outside Slurm
  std::string step_id;  // SLURM_STEP_ID (the srun step); "" when unset
  std::string host;     // host_name()
  std::int64_t pid = 0;
  std::uint64_t pid_start = 0;  // the process's start time (clock ticks since boot, /proc/PID/stat): a reused pid differs
  std::string since;            // RFC 3339, when the folder was taken

  static auto fields() {
    using namespace json_fields;
    using R = RunFolderOwnerRecord;
    return std::tuple{key("job_id", &R::job_id), key("step_id", &R::step_id), key("host", &R::host), key("pid", &R::pid),
                      key("pid_start", &R::pid_start), key("since", &R::since)};
  }
  // "job 12 (step 0) on host node1, pid 345, since 2026-01-02T03:04:05Z"
  std::string describe() const;
};

// This process as an owner: the Slurm job and step from the environment, host, pid and its start time.
RunFolderOwnerRecord this_process_as_owner();

// Whether an owner still runs, and how that was decided (for the log and the refusal).
struct OwnerLiveness {
  bool alive = true;
  std::string why;
};
using OwnerLivenessCheck = std::function<OwnerLiveness(const RunFolderOwnerRecord& owner, const RunFolderOwnerRecord& me)>;

// The default check. Same host: alive while its pid runs with the same start time (the answer is
// sure). Another host: alive unless Slurm says its job (or, for a previous step of our own job, its
// step) no longer runs: `squeue -h -j ID` (`-s` for steps); without a job id or without squeue
// there is no way to tell, and the owner counts as alive.
OwnerLiveness default_owner_liveness(const RunFolderOwnerRecord& owner, const RunFolderOwnerRecord& me);

// The ownership of one run folder, released (the lock removed, if still ours) on destruction.
class RunFolderOwner {
 public:
  static constexpr const char* kLockName = "owner.lock";

  // Takes `run_dir` (which must exist) for `me`. A live owner: UsageError (exit 2) naming it and
  // what to do; one on this host (another process) is first given `same_host_grace` to end, as
  // the ranks of a crashed attempt may still be exiting when the launcher restarts the job. A
  // stale owner: taken over (took_over() says from whom and why). Several takers at once, on one
  // host or many: exactly one wins, the others see it as the live owner.
  static RunFolderOwner take(const std::string& run_dir, const RunFolderOwnerRecord& me = this_process_as_owner(),
                             const OwnerLivenessCheck& alive = default_owner_liveness,
                             std::chrono::milliseconds same_host_grace = kSameHostGrace);
  static constexpr std::chrono::milliseconds kSameHostGrace{5000};

  RunFolderOwner(RunFolderOwner&& other) noexcept;
  RunFolderOwner& operator=(RunFolderOwner&& other) noexcept;
  RunFolderOwner(const RunFolderOwner&) = delete;
  RunFolderOwner& operator=(const RunFolderOwner&) = delete;
  ~RunFolderOwner();

  // Removes the lock when it still names us (a taker that judged us stale keeps its own); idempotent.
  void release();
  const std::string& lock_path() const { return path_; }
  // The stale owner this take replaced and why it was stale; empty when the folder was free.
  const std::string& took_over() const { return took_over_; }

 private:
  RunFolderOwner(std::string path, RunFolderOwnerRecord me, std::string took_over)
      : path_(std::move(path)), me_(std::move(me)), took_over_(std::move(took_over)) {}
  std::string path_;  // "" once released or moved from
  RunFolderOwnerRecord me_;
  std::string took_over_;
};

// Collective over `comm`: rank 0 takes `run_dir` and logs a take-over; every rank learns the
// outcome, so a refusal is the same UsageError on every rank. Rank 0 returns the ownership, the
// other ranks nothing.
std::optional<RunFolderOwner> take_run_folder(const std::string& run_dir, Communicator& comm);

}  // namespace shardtrain
