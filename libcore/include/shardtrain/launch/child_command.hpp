// The training command the resilient launcher runs (everything after `--`), what the launcher
// reads from it, and how it is rewritten for a restart. The command is an argument vector, never a
// shell string: a run folder or option value is passed to the program as it is.
//
// Contract:
//   - parse() requires `--run-dir DIR` (or `--run-dir=DIR`); `--ckpt-dir` defaults to
//     DIR/checkpoints. UsageError names what is missing.
//   - The rank count is the value after the first of -np, -n, --np, --ntasks (mpirun's and
//     srun's spellings; `--np=N` and `--ntasks=N` too); rank_count() is empty when there is none.
//   - for_attempt(attempt, world): attempt 0 is the command as given; later attempts add
//     `--resume auto` unless the command already has --resume, and replace the rank count by
//     `world` when the command states one (elastic restarts).
//   - on_hosts(argv, slots): after a node loss, where the next attempt may run: for mpirun (also
//     mpiexec, orterun) `--mca orte_no_vm 1 -H host:slots,...` of the live hosts replaces any
//     -H/--host (daemons only where ranks run, not on the lost node of the allocation); for srun,
//     `--exclude=HOSTS` of the lost ones is added. Another launcher is left as it is.
#pragma once
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::launch {

class ChildCommand {
 public:
  static ChildCommand parse(std::vector<std::string> argv);

  const std::vector<std::string>& argv() const { return argv_; }
  const std::string& run_dir() const { return run_dir_; }
  const std::string& ckpt_dir() const { return ckpt_dir_; }
  bool has_resume() const { return has_resume_; }
  std::optional<int> rank_count() const;             // the command's world size, if it says one
  std::optional<int> global_batch() const { return global_batch_; }
  int micro_batch() const { return micro_batch_; }   // 1 when the command does not say
  // The argument vector of attempt `attempt` (0-based) on `world` ranks (see the contract).
  std::vector<std::string> for_attempt(int attempt, std::optional<int> world) const;
  // `live`: host -> ranks it may hold; `lost`: the hosts to stay off. `in_allocation`: inside a
  // Slurm job, whose failed step may stay listed (its tasks on the lost node never confirmed
  // gone) and hold the other nodes' CPUs: the new step then overlaps it (srun --overlap; for
  // mpirun, whose daemons srun starts, plm_slurm_args).
  static std::vector<std::string> on_hosts(std::vector<std::string> argv, const std::map<std::string, int>& live,
                                           const std::vector<std::string>& lost, bool in_allocation = false);

 private:
  std::vector<std::string> argv_;
  std::string run_dir_, ckpt_dir_;
  bool has_resume_ = false;
  std::optional<std::size_t> rank_count_at_;  // index of the rank count's value
  bool rank_count_joined_ = false;            // written as --np=N (one word)
  std::optional<int> global_batch_;
  int micro_batch_ = 1;
};

}  // namespace shardtrain::launch
