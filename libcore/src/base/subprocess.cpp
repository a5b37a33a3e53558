#include "shardtrain/base/subprocess.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "shardtrain/base/error.hpp"

extern char** environ;

namespace shardtrain {
namespace {

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

// posix_spawn's file actions own nothing of ours; this frees them on every path out.
struct FileActions {
  posix_spawn_file_actions_t actions;
  FileActions() { posix_spawn_file_actions_init(&actions); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions); }
};

}  // namespace

std::string find_on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return "";
}

int run_child(const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) throw IoError("run_child: empty argument vector");
  const std::string program = find_on_path(argv[0]);
  if (program.empty()) throw IoError(argv[0] + ": not found on PATH");
  if (!log_path.empty()) {  // open it here first: a bad path is our error, not a silent child failure
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw IoError(log_path + ": cannot open for writing (" + std::strerror(errno) + ")");
    close(fd);
  }
  FileActions fa;
  if (!log_path.empty()) {
    posix_spawn_file_actions_addopen(&fa.actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa.actions, STDOUT_FILENO, STDERR_FILENO);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, program.c_str(), &fa.actions, nullptr, args.data(), environ);
  if (rc != 0) throw IoError(program + ": cannot start (" + std::strerror(rc) + ")");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw IoError(program + ": waitpid failed (" + std::strerror(errno) + ")");
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

}  // namespace shardtrain
