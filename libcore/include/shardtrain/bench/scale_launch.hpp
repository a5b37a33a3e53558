// `scale-bench run`: the training job at each world size W, one after another, each as
//   mpirun -np W [--oversubscribe] BIN_DIR/<tool> TRAIN-ARGS --run-dir OUT/w<W>
// started without a shell (base/subprocess.hpp), its output in OUT/w<W>.log; then the scaling
// report (scaling/report.hpp) of the run folders into OUT.
#pragma once
#include <string>
#include <vector>

namespace shardtrain {

struct ScaleRunOptions {
  std::vector<int> workers;              // world sizes, in launch order (the first is the weak-scaling reference)
  bool strong = false;                   // strong: TRAIN-ARGS as given; weak: --global-batch x W / workers[0]
  std::string tool = "ddp-train";        // ddp-train or fsdp-train, from this binary's folder
  std::string out_dir = ".";
  std::string model_path;                // passed to the report (--step-model)
  std::vector<std::string> train_args;   // after "--"; must not hold --run-dir
};

// "1,2,4" -> {1, 2, 4}. UsageError for an empty item, a non-number, a W < 1 or a repeated W.
std::vector<int> parse_workers(const std::string& list);

// TRAIN-ARGS for world size `w`: weak scaling scales --global-batch (as "--global-batch N" or
// "--global-batch=N") by w / workers[0] (UsageError when it is missing or does not divide).
std::vector<std::string> train_args_for(const ScaleRunOptions& options, int w);

// The full argument vector launched for `w` (`cpus`: the host's; --oversubscribe when w > cpus).
std::vector<std::string> launch_argv(const ScaleRunOptions& options, int w, const std::string& bin_dir, int cpus);

// Checks the options (UsageError), launches every W (Error with the job's exit code class and its
// log when one fails), then writes the report. Returns the run folders.
std::vector<std::string> run_scaling_series(const ScaleRunOptions& options);

}  // namespace shardtrain
