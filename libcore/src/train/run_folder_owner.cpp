#include "shardtrain/train/run_folder_owner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/host.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/comm/string_collectives.hpp"
#include "shardtrain/slurm/queue.hpp"

namespace shardtrain {
namespace {

// A lock that does not parse (a taker died between creating and writing it, a moment's work) is
// taken over once it is this old; younger, it is probably being written and is read again.
constexpr double kUnreadableStaleS = 10.0;
// The take-over guard (owner.lock.takeover) is held for a re-read and a rename: one older than
// this belongs to a taker that died holding it.
constexpr double kGuardStaleS = 10.0;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The fields of /proc/PID/stat after the command name (field 3 first); empty when unreadable.
// The command name (field 2) may hold spaces and parentheses, so fields start after its last ')'.
std::vector<std::string> proc_stat_fields(std::int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest(stat.substr(close + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// Field 22 (start time in clock ticks since boot); 0 when unreadable.
std::uint64_t process_start_ticks(std::int64_t pid) {
  const auto f = proc_stat_fields(pid);
  return f.size() > 19 ? std::strtoull(f[19].c_str(), nullptr, 10) : 0;
}

// Field 3 (R, S, D, Z, X, ...); 0 when unreadable.
char process_state(std::int64_t pid) {
  const auto f = proc_stat_fields(pid);
  return f.empty() || f[0].empty() ? 0 : f[0][0];
}

double age_seconds(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return double(std::time(nullptr) - st.st_mtime);
}

// Creates `path` only if it does not exist (O_CREAT | O_EXCL: one creator wins, on NFS too) and
// writes `content` to it. false: it exists; IoError: it could not be created or written.
bool create_exclusive(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw IoError("cannot create " + path + ": " + std::strerror(errno) + " (is the run folder writable?)");
  }
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      throw IoError("cannot write " + path + ": " + std::strerror(err) + " (disk full or quota?)");
    }
    done += std::size_t(n);
  }
  ::fsync(fd);
  ::close(fd);
  return true;
}

// The file's bytes; nullopt when it does not exist (any more).
std::optional<std::string> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::optional<RunFolderOwnerRecord> parse_record(const std::string& raw, const std::string& path) {
  try {
    return json_fields::read<RunFolderOwnerRecord>(JsonFile::parse(raw, path, "the run folder owner record"), "");
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

OwnerLiveness same_host_liveness(const RunFolderOwnerRecord& owner, const RunFolderOwnerRecord& me) {
  const std::string pid = std::to_string(owner.pid);
  if (owner.pid == me.pid && owner.pid_start == me.pid_start) return {true, "it is this very process"};
  if (owner.pid <= 0) return {false, "it names no pid"};
  if (::kill(pid_t(owner.pid), 0) != 0 && errno == ESRCH) return {false, "pid " + pid + " is gone on " + owner.host};
  if (const char state = process_state(owner.pid); state == 'Z' || state == 'X')
    return {false, "pid " + pid + " on " + owner.host + " has exited (not yet reaped)"};
  const std::uint64_t start = process_start_ticks(owner.pid);
  if (owner.pid_start != 0 && start != 0 && start != owner.pid_start)
    return {false, "pid " + pid + " on " + owner.host + " is now another process (the owner's is gone)"};
  return {true, "pid " + pid + " runs on " + owner.host};
}

// Slurm's word on the owner's job (or on a step of our own job): alive unless Slurm says it ended.
OwnerLiveness slurm_liveness(const RunFolderOwnerRecord& owner, const RunFolderOwnerRecord& me) {
  const std::string where = "on host " + owner.host + ", not this one (" + me.host + ")";
  if (owner.job_id.empty())
    return {true, "it runs outside Slurm " + where + ", so whether it still runs cannot be told from here"};
  if (owner.job_id == me.job_id) {
    // A step of our own job on another host. The same step id: the previous run of a requeued job
    // (Slurm restarts step ids and ends a job's steps before requeueing it). Another step: alive
    // while squeue lists it.
    if (owner.step_id.empty() || owner.step_id == me.step_id)
      return {false, "it was an earlier run of this job (" + owner.job_id + ") " + where + ", requeued since"};
    const std::string step = owner.job_id + "." + owner.step_id;
    const slurm::QueueAnswer steps = slurm::job_steps(owner.job_id);
    if (!steps.answered) return {true, "squeue -s -j " + owner.job_id + " could not say (" + steps.failure + ")"};
    for (const std::string& line : steps.lines)
      if (line == step) return {true, "its step " + step + " still runs (squeue -s) " + where};
    return {false, "its step " + step + " no longer runs (squeue -s)"};
  }
  const slurm::QueueAnswer answer = slurm::job_state(owner.job_id);
  if (answer.unknown_job) return {false, "Slurm no longer knows job " + owner.job_id};
  if (!answer.answered)
    return {true, "it runs " + where + " and squeue could not say whether Slurm job " + owner.job_id + " still runs (" +
                      answer.failure + ")"};
  const std::string state = answer.lines.empty() ? "" : answer.lines.front();
  if (slurm::state_is_running(state)) return {true, "Slurm job " + owner.job_id + " is " + state + " (squeue) " + where};
  return {false, "Slurm job " + owner.job_id + " is " + (state.empty() ? std::string("no longer listed") : state) +
                     " (squeue), no longer running"};
}

std::string refusal(const std::string& run_dir, const std::string& lock, const RunFolderOwnerRecord& owner,
                     const std::string& why) {
  std::string message = "run folder " + run_dir + " is in use by " + owner.describe() + " (" + why +
                        "): two jobs in one folder would mix their step logs and checkpoints; wait for it to end";
  if (!owner.job_id.empty()) message += " (or scancel " + owner.job_id + ")";
  return message + ", or give this job another --run-dir; if that job is surely gone, remove " + lock;
}

}  // namespace

std::string RunFolderOwnerRecord::describe() const {
  std::string s = job_id.empty() ? "a job outside Slurm" : "job " + job_id;
  if (!job_id.empty() && !step_id.empty()) s += " (step " + step_id + ")";
  return s + " on host " + host + ", pid " + std::to_string(pid) + ", since " + since;
}

RunFolderOwnerRecord this_process_as_owner() {
  RunFolderOwnerRecord r;
  r.job_id = env_or_empty("SLURM_JOB_ID");
  r.step_id = env_or_empty("SLURM_STEP_ID");
  r.host = host_name();
  r.pid = std::int64_t(::getpid());
  r.pid_start = process_start_ticks(r.pid);
  r.since = now_rfc3339();
  return r;
}

OwnerLiveness default_owner_liveness(const RunFolderOwnerRecord& owner, const RunFolderOwnerRecord& me) {
  return owner.host == me.host ? same_host_liveness(owner, me) : slurm_liveness(owner, me);
}

RunFolderOwner RunFolderOwner::take(const std::string& run_dir, const RunFolderOwnerRecord& me,
                                    const OwnerLivenessCheck& alive, std::chrono::milliseconds same_host_grace) {
  const std::string path = run_dir + "/" + kLockName;
  const std::string guard = path + ".takeover";
  const std::string mine = json_fields::write(me).dump() + "\n";
  std::string took_over;
  // Each round: create the lock, or judge the one there. A stale one is replaced under the guard,
  // and only if it is still the very lock judged (another taker may have replaced it meanwhile).
  for (int round = 0; round < 400; ++round) {
    if (create_exclusive(path, mine)) return RunFolderOwner(path, me, took_over);
    const std::optional<std::string> raw = read_raw(path);
    if (!raw) continue;  // released between our create and our read: create again
    std::string why;
    if (const auto owner = parse_record(*raw, path)) {
      OwnerLiveness verdict = alive(*owner, me);
      // A restart right after a crash finds the old ranks of this host still ending (mpirun
      // returns before every rank is gone): a live owner on this host gets a moment to end.
      const bool here = owner->host == me.host && !(owner->pid == me.pid && owner->pid_start == me.pid_start);
      for (auto waited = std::chrono::milliseconds(0); verdict.alive && here && waited < same_host_grace;
           waited += std::chrono::milliseconds(100)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        verdict = alive(*owner, me);
      }
      if (verdict.alive) throw UsageError(refusal(run_dir, path, *owner, verdict.why));
      why = owner->describe() + ": " + verdict.why;
    } else if (age_seconds(path) >= kUnreadableStaleS) {
      why = "an unreadable lock, " + std::to_string(int(age_seconds(path))) + " s old";
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // being written: read it again
      continue;
    }
    if (!create_exclusive(guard, mine)) {
      if (age_seconds(guard) >= kGuardStaleS) ::unlink(guard.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    bool won = false;
    try {
      if (read_raw(path) == raw) {
        ::unlink(path.c_str());
        took_over = why;
        won = create_exclusive(path, mine);
      }
    } catch (...) {
      ::unlink(guard.c_str());
      throw;
    }
    ::unlink(guard.c_str());
    if (won) return RunFolderOwner(path, me, took_over);
  }
  throw IoError("could not take " + path + " after 400 tries (other jobs keep taking and releasing it?)");
}

RunFolderOwner::RunFolderOwner(RunFolderOwner&& other) noexcept
    : path_(std::move(other.path_)), me_(std::move(other.me_)), took_over_(std::move(other.took_over_)) {
  other.path_.clear();
}

RunFolderOwner& RunFolderOwner::operator=(RunFolderOwner&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    me_ = std::move(other.me_);
    took_over_ = std::move(other.took_over_);
    other.path_.clear();
  }
  return *this;
}

RunFolderOwner::~RunFolderOwner() { release(); }

void RunFolderOwner::release() {
  if (path_.empty()) return;
  const std::optional<std::string> raw = read_raw(path_);
  if (raw && *raw == json_fields::write(me_).dump() + "\n") ::unlink(path_.c_str());
  path_.clear();
}

std::optional<RunFolderOwner> take_run_folder(const std::string& run_dir, Communicator& comm) {
  std::optional<RunFolderOwner> owner;
  std::string status;
  if (comm.rank() == 0) {
    try {
      owner.emplace(RunFolderOwner::take(run_dir));
      if (!owner->took_over().empty())
        log_line("run folder " + run_dir + ": took it over from a stale owner, " + owner->took_over());
    } catch (const std::exception& e) {
      status = encode_error(e);
    }
  }
  broadcast_string(status, comm);
  if (!status.empty()) throw_encoded(status);
  return owner;
}

}  // namespace shardtrain
