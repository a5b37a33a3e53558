#include "shardtrain/base/subprocess.hpp"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <tuple>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <optional>
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

namespace {

int exit_status_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

// Starts argv[0] with stdout and stderr on the write end of a new pipe; returns the pid and the
// read end (close-on-exec, so later children do not hold it open).
std::pair<pid_t, int> spawn_on_pipe(const std::vector<std::string>& argv, bool stderr_too) {
  if (argv.empty()) throw IoError("run_child: empty argument vector");
  const std::string program = find_on_path(argv[0]);
  if (program.empty()) throw IoError(argv[0] + ": not found on PATH");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw IoError(std::string("cannot make a pipe (") + std::strerror(errno) + ")");
  FileActions fa;
  posix_spawn_file_actions_adddup2(&fa.actions, fds[1], STDOUT_FILENO);
  if (stderr_too) posix_spawn_file_actions_adddup2(&fa.actions, fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, program.c_str(), &fa.actions, nullptr, args.data(), environ);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw IoError(program + ": cannot start (" + std::strerror(rc) + ")");
  }
  return {pid, fds[0]};
}

// Reads what is ready on `fd` into `sink` within `timeout_ms`; false at end of file.
bool read_ready(int fd, int timeout_ms, const std::function<void(const char*, std::size_t)>& sink) {
  pollfd p{fd, POLLIN, 0};
  const int n = poll(&p, 1, timeout_ms);
  if (n <= 0) return true;  // nothing yet (or EINTR): not the end
  char buf[65536];
  const ssize_t got = read(fd, buf, sizeof buf);
  if (got > 0) {
    sink(buf, std::size_t(got));
    return true;
  }
  return got < 0 && (errno == EINTR || errno == EAGAIN);
}

int wait_for(pid_t pid, int options, bool& done) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, options);
  if (r < 0 && errno != EINTR) throw IoError(std::string("waitpid failed (") + std::strerror(errno) + ")");
  done = r == pid;
  return status;
}

}  // namespace

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
  return exit_status_of(status);
}

int run_child_teed(const std::vector<std::string>& argv, const std::string& log_path,
                   const std::function<void(int pid)>& on_started, double drain_s,
                   const std::function<bool()>& should_end, double kill_after_s) {
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) throw IoError(log_path + ": cannot open for writing (" + std::strerror(errno) + ")");
  pid_t pid = 0;
  int fd = -1;
  try {
    std::tie(pid, fd) = spawn_on_pipe(argv, /*stderr_too=*/true);
  } catch (...) {
    close(log);
    throw;
  }
  if (on_started) on_started(pid);
  auto sink = [&](const char* data, std::size_t n) {
    // Short writes to a terminal or a full disk: the screen copy is best effort, the log is ours.
    if (::write(STDOUT_FILENO, data, n) < 0) {}
    for (std::size_t off = 0; off < n;) {
      const ssize_t w = ::write(log, data + off, n - off);
      if (w <= 0) break;
      off += std::size_t(w);
    }
  };
  bool exited = false;
  int status = 0;
  bool open_pipe = true;
  std::optional<std::chrono::steady_clock::time_point> termed;
  bool killed = false;
  while (!exited) {
    if (open_pipe) open_pipe = read_ready(fd, 50, sink);
    else usleep(20000);
    status = wait_for(pid, WNOHANG, exited);
    if (exited) break;
    if (!termed && should_end && should_end()) {
      kill(pid, SIGTERM);
      termed = std::chrono::steady_clock::now();
    } else if (termed && !killed &&
               std::chrono::steady_clock::now() - *termed >= std::chrono::duration<double>(kill_after_s)) {
      kill(pid, SIGKILL);
      killed = true;
    }
  }
  if (on_started) on_started(-1);
  // A child we ended has nothing more to say that is worth waiting for, and its orphans (mpirun's
  // srun to a cut-off node) would hold the pipe for the whole drain.
  if (termed) drain_s = std::min(drain_s, 0.1);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(drain_s);
  while (open_pipe && std::chrono::steady_clock::now() < until) open_pipe = read_ready(fd, 20, sink);
  close(fd);
  close(log);
  return exit_status_of(status);
}

ChildOutput run_child_captured(const std::vector<std::string>& argv, bool stderr_too) {
  auto [pid, fd] = spawn_on_pipe(argv, stderr_too);
  ChildOutput out;
  while (read_ready(fd, 1000, [&](const char* d, std::size_t n) { out.out.append(d, n); })) {}
  close(fd);
  bool done = false;
  int status = 0;
  while (!done) status = wait_for(pid, 0, done);
  out.status = exit_status_of(status);
  return out;
}

LimitedRun run_child_limited(const std::vector<std::string>& argv, const std::string& log_path, double limit_s,
                             const std::function<bool()>& stop, double grace_s) {
  if (argv.empty()) throw IoError("run_child_limited: empty argument vector");
  const std::string program = find_on_path(argv[0]);
  if (program.empty()) throw IoError(argv[0] + ": not found on PATH");
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(log_path + ": cannot open for writing (" + std::strerror(errno) + ")");
  close(fd);
  FileActions fa;
  posix_spawn_file_actions_addopen(&fa.actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa.actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: the limit ends the child's children too
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();  // before the start: seconds is the command's as a user's clock sees it
  const int rc = posix_spawn(&pid, program.c_str(), &fa.actions, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw IoError(program + ": cannot start (" + std::strerror(rc) + ")");
  const auto limit = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_s));
  LimitedRun out;
  Clock::time_point killed_at{};
  bool ended = false, exited = false;
  int status = 0;
  useconds_t pause = 1000;  // 1 ms, doubling to 20: a short command's end is seen within a few ms
  while (!exited) {
    status = wait_for(pid, WNOHANG, exited);
    if (exited) break;
    const auto now = Clock::now();
    if (!ended && (now >= limit || (stop && stop()))) {
      (now >= limit ? out.timed_out : out.stopped) = true;
      kill(-pid, SIGTERM);
      ended = true;
      killed_at = now;
    } else if (ended && now - killed_at >= std::chrono::duration<double>(grace_s)) {
      kill(-pid, SIGKILL);
    }
    usleep(pause);
    pause = std::min<useconds_t>(pause * 2, 20000);
  }
  if (ended) kill(-pid, SIGKILL);  // what the group's leader left behind (ESRCH when nothing)
  out.status = exit_status_of(status);
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

std::vector<std::string> last_lines_of(const std::string& log_path, std::size_t n) {
  std::ifstream in(log_path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > n) lines.pop_front();
  }
  return {lines.begin(), lines.end()};
}

}  // namespace shardtrain
