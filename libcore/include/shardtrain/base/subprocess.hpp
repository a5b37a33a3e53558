// Child processes without a shell: the argument vector goes to the program as is (no word
// splitting, no globbing), so a file name or a training option can never inject a command.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace shardtrain {

// The full path of `name` found in the directories of $PATH (or `name` itself when it contains a
// '/' and is executable); "" when there is none.
std::string find_on_path(const std::string& name);

// The last `n` lines of a child's log (fewer when it has fewer; none when it cannot be read), for
// the message of a command that failed.
std::vector<std::string> last_lines_of(const std::string& log_path, std::size_t n);

// Runs argv[0] (looked up with find_on_path) with `argv` and waits for it. Its stdout and stderr
// go to `log_path` (created or truncated) when that is non-empty, else to ours. Returns its exit
// status (0-255), or 128 + N when signal N ended it. Throws IoError when argv[0] is not found or
// cannot be started, or `log_path` cannot be opened.
int run_child(const std::vector<std::string>& argv, const std::string& log_path = "");

// Runs argv with its stdout and stderr on one pipe, and copies every byte, as it comes, to our
// stdout and to `log_path` (created or truncated): a launcher's attempt log that is also on the
// screen. `on_started(pid)` is called once the child runs (to forward signals to it), and with -1
// once it has been waited for. Output that the child's own children still write after it exited
// (mpirun's daemons) is read until the pipe closes or `drain_s` seconds pass. Returns the exit
// status as run_child does; the same IoErrors.
// `should_end`, when set, is asked every 20-50 ms (more often while output flows) while the child runs; once it answers true
// the child is sent SIGTERM, and SIGKILL `kill_after_s` seconds later if it is still there (the
// child alone, not a process group: it shares ours, so a terminal's Ctrl-C and a batch system's
// signals reach it as they always did). The status is then the child's (128 + 15 or 128 + 9 when
// it did not handle the signal), and the output drain after it is at most 0.1 s.
int run_child_teed(const std::vector<std::string>& argv, const std::string& log_path,
                   const std::function<void(int pid)>& on_started = {}, double drain_s = 0.5,
                   const std::function<bool()>& should_end = {}, double kill_after_s = 1.0);

// Runs argv and returns its exit status (as run_child) and everything it wrote to stdout; its
// stderr goes to ours, or into `out` too with `stderr_too` (a command whose answer is on stderr,
// such as sbatch --test-only).
struct ChildOutput {
  int status = 0;
  std::string out;
};
ChildOutput run_child_captured(const std::vector<std::string>& argv, bool stderr_too = false);

// Runs argv under a time limit, as coreutils' `timeout -k GRACE LIMIT` would, but without a shell:
// the child leads a process group of its own, its stdout and stderr are appended to `log_path`
// (created when missing). When `limit_s` passes, or `stop()` turns true (polled every 1 ms at first,
// the pause doubling to 20 ms; a signal we were sent), the whole group gets SIGTERM, then SIGKILL `grace_s` later if the child
// still runs: an mpirun and its ranks end together. After a limit or a stop, what is left of the
// group is killed too. status is the child's exit status as run_child returns it; the same IoErrors.
struct LimitedRun {
  int status = 0;
  bool timed_out = false;  // the limit passed: the group was ended
  bool stopped = false;    // stop() asked: the group was ended
  double seconds = 0;      // from just before the start to the exit seen: within the poll's pause (1-20 ms)
};
LimitedRun run_child_limited(const std::vector<std::string>& argv, const std::string& log_path, double limit_s,
                             const std::function<bool()>& stop = {}, double grace_s = 10);

}  // namespace shardtrain
