// The one way the slurm layer runs a Slurm command and reads its answer (private to the layer):
// the argument vector goes to the program as is (base/subprocess.hpp: no shell), and the answer
// says whether the command could run at all, its status and its output, so that each caller
// decides what a missing or failing Slurm means (nothing known, an IoError, "keep the job alive").
#pragma once
#include <string>
#include <vector>

namespace shardtrain::slurm::detail {

struct Answer {
  bool ran = false;  // found and started (else `out` says why not)
  int status = -1;   // its exit status when it ran
  std::string out;   // stdout, and stderr too when asked for
  bool ok() const { return ran && status == 0; }
  std::vector<std::string> lines() const;  // the output's lines, trimmed, empty ones left out
  std::string said() const;                // the output trimmed
};

// `stderr_too`: the command's stderr in `out` as well (where its answer or its complaint is).
Answer run(const std::vector<std::string>& argv, bool stderr_too = true);
// The answer when ok(); else IoError "ARGV exited N: OUTPUT" (or why it could not run).
Answer run_checked(const std::vector<std::string>& argv, bool stderr_too = true);

// `words` joined with `sep`; command_text: an argument vector as one line for messages.
std::string joined(const std::vector<std::string>& words, const std::string& sep);
inline std::string command_text(const std::vector<std::string>& argv) { return joined(argv, " "); }

}  // namespace shardtrain::slurm::detail
