// Child processes without a shell: the argument vector goes to the program as is (no word
// splitting, no globbing), so a file name or a training option can never inject a command.
#pragma once
#include <string>
#include <vector>

namespace shardtrain {

// The full path of `name` found in the directories of $PATH (or `name` itself when it contains a
// '/' and is executable); "" when there is none.
std::string find_on_path(const std::string& name);

// Runs argv[0] (looked up with find_on_path) with `argv` and waits for it. Its stdout and stderr
// go to `log_path` (created or truncated) when that is non-empty, else to ours. Returns its exit
// status (0-255), or 128 + N when signal N ended it. Throws IoError when argv[0] is not found or
// cannot be started, or `log_path` cannot be opened.
int run_child(const std::vector<std::string>& argv, const std::string& log_path = "");

}  // namespace shardtrain
