// One owner per run folder (train/run_folder_owner.hpp): a free folder is taken, a live owner
// refuses the next taker with its name, a stale one is taken over, and of many takers at once
// (separate processes, started together) exactly one wins, for a free folder and for a stale lock.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/train/run_folder_owner.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

std::string lock_of(const std::string& dir) { return dir + "/" + RunFolderOwner::kLockName; }

void write_lock(const std::string& dir, const RunFolderOwnerRecord& r) {
  std::ofstream(lock_of(dir)) << json_fields::write(r).dump() << "\n";
}

RunFolderOwnerRecord read_lock(const std::string& dir) {
  return json_fields::read<RunFolderOwnerRecord>(JsonFile::read(lock_of(dir), "the run folder owner record"), "");
}

// A pid that surely ran on this host and is gone: a child that exited and was reaped.
std::int64_t gone_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

// `n` processes call take() on `dir` at once (released together through a pipe); each reports
// whether it won and holds what it won until all have reported. Returns the number of winners.
int race(const std::string& dir, int n) {
  int go[2], done[2], hold[2];
  REQUIRE(pipe(go) == 0);
  REQUIRE(pipe(done) == 0);
  REQUIRE(pipe(hold) == 0);
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    const pid_t child = fork();
    if (child == 0) {
      close(go[1]);
      close(done[0]);
      close(hold[1]);
      char c;
      (void)!read(go[0], &c, 1);  // EOF when the parent closes the write end: all start at once
      char won = 0;
      std::optional<RunFolderOwner> owner;
      try {
        owner.emplace(RunFolderOwner::take(dir, this_process_as_owner(), default_owner_liveness,
                                            std::chrono::milliseconds(0)));
        won = 1;
      } catch (const UsageError&) {
      } catch (...) {
        won = 2;  // anything else is a failure of the test
      }
      (void)!write(done[1], &won, 1);
      (void)!read(hold[0], &c, 1);  // keep the ownership until every taker has tried
      _exit(0);                     // no destructors: the winner's lock stays, as after a kill
    }
    children.push_back(child);
  }
  close(go[0]);
  close(done[1]);
  close(hold[0]);
  close(go[1]);
  int winners = 0, errors = 0;
  for (int i = 0; i < n; ++i) {
    char won = 0;
    REQUIRE(read(done[0], &won, 1) == 1);
    winners += won == 1;
    errors += won == 2;
  }
  close(hold[1]);
  for (pid_t c : children) waitpid(c, nullptr, 0);
  close(done[0]);
  CHECK(errors == 0);
  return winners;
}

}  // namespace

TEST_CASE("run folder owner: a free folder is taken, named in the lock, and released") {
  const std::string dir = test::temp_dir("owner-free");
  {
    RunFolderOwner owner = RunFolderOwner::take(dir);
    CHECK(owner.took_over().empty());
    const RunFolderOwnerRecord r = read_lock(dir);
    CHECK(r.pid == std::int64_t(getpid()));
    CHECK(r.host == this_process_as_owner().host);
    CHECK(r.pid_start != 0);
    CHECK_FALSE(r.since.empty());
  }
  CHECK_FALSE(std::filesystem::exists(lock_of(dir)));  // released when the owner goes
  RunFolderOwner again = RunFolderOwner::take(dir);    // and free again
  CHECK(again.took_over().empty());
}

TEST_CASE("run folder owner: a live owner refuses the next taker, naming the owner") {
  const std::string dir = test::temp_dir("owner-live");
  SECTION("this process holds it") {
    RunFolderOwner first = RunFolderOwner::take(dir);
    try {
      RunFolderOwner::take(dir, this_process_as_owner(), default_owner_liveness, std::chrono::milliseconds(0));
      FAIL("a second take of a held folder succeeded");
    } catch (const UsageError& e) {
      const std::string m = e.what();
      CHECK(m.find("in use by") != std::string::npos);
      CHECK(m.find("pid " + std::to_string(getpid())) != std::string::npos);
      CHECK(m.find("--run-dir") != std::string::npos);
    }
    CHECK(read_lock(dir).pid == std::int64_t(getpid()));  // the refused taker left the lock alone
  }
  SECTION("a Slurm job on another host that Slurm says is running") {
    RunFolderOwnerRecord other = this_process_as_owner();
    other.job_id = "4242";
    other.host = "node7";
    other.pid = 99;
    write_lock(dir, other);
    const auto running = [](const RunFolderOwnerRecord&, const RunFolderOwnerRecord&) {
      return OwnerLiveness{true, "Slurm job 4242 is RUNNING (squeue)"};
    };
    try {
      RunFolderOwner::take(dir, this_process_as_owner(), running);
      FAIL("a folder held by a running job was taken");
    } catch (const UsageError& e) {
      const std::string m = e.what();
      CHECK(m.find("job 4242") != std::string::npos);
      CHECK(m.find("node7") != std::string::npos);
      CHECK(m.find("scancel 4242") != std::string::npos);
    }
  }
  SECTION("another host outside Slurm: cannot be told, so refused") {
    RunFolderOwnerRecord other = this_process_as_owner();
    other.job_id = "";
    other.host = "elsewhere";
    write_lock(dir, other);
    const OwnerLiveness v = default_owner_liveness(other, this_process_as_owner());
    CHECK(v.alive);
    CHECK_THROWS_AS(RunFolderOwner::take(dir), UsageError);  // another host: no grace, refused at once
  }
}

TEST_CASE("run folder owner: a stale owner is taken over, and the take says from whom") {
  const std::string dir = test::temp_dir("owner-stale");
  RunFolderOwnerRecord dead = this_process_as_owner();
  SECTION("its pid is gone on this host") {
    dead.pid = gone_pid();
    write_lock(dir, dead);
    RunFolderOwner owner = RunFolderOwner::take(dir);
    CHECK(owner.took_over().find("pid " + std::to_string(dead.pid) + " is gone") != std::string::npos);
    CHECK(read_lock(dir).pid == std::int64_t(getpid()));
  }
  SECTION("its pid now belongs to another process (a different start time)") {
    dead.pid = std::int64_t(getppid());  // alive, but not the process that took the folder
    dead.pid_start = 1;
    write_lock(dir, dead);
    RunFolderOwner owner = RunFolderOwner::take(dir);
    CHECK(owner.took_over().find("now another process") != std::string::npos);
  }
  SECTION("its Slurm job ended (as the check says)") {
    dead.job_id = "17";
    dead.host = "node2";
    write_lock(dir, dead);
    const auto ended = [](const RunFolderOwnerRecord&, const RunFolderOwnerRecord&) {
      return OwnerLiveness{false, "Slurm no longer knows job 17"};
    };
    RunFolderOwner owner = RunFolderOwner::take(dir, this_process_as_owner(), ended);
    CHECK(owner.took_over().find("job 17 on host node2") != std::string::npos);
  }
  SECTION("an earlier run of this very Slurm job on another host (requeued)") {
    RunFolderOwnerRecord me = this_process_as_owner();
    me.job_id = dead.job_id = "31";
    me.step_id = dead.step_id = "0";
    dead.host = "node1";
    CHECK_FALSE(default_owner_liveness(dead, me).alive);
  }
  SECTION("an unreadable lock, old enough") {
    std::ofstream(lock_of(dir)) << "{\"job_id\": ";
    std::filesystem::last_write_time(lock_of(dir),
                                     std::filesystem::file_time_type::clock::now() - std::chrono::seconds(60));
    RunFolderOwner owner = RunFolderOwner::take(dir);
    CHECK(owner.took_over().find("unreadable") != std::string::npos);
  }
}

TEST_CASE("run folder owner: an owner on this host that ends within the grace is taken over") {
  const std::string dir = test::temp_dir("owner-grace");
  const pid_t child = fork();
  if (child == 0) {
    RunFolderOwner mine = RunFolderOwner::take(dir);
    usleep(300 * 1000);
    _exit(0);  // a crash: the lock stays behind
  }
  for (int i = 0; i < 100 && !std::filesystem::exists(lock_of(dir)); ++i) usleep(10 * 1000);
  REQUIRE(std::filesystem::exists(lock_of(dir)));
  std::thread reaper([child] { waitpid(child, nullptr, 0); });
  RunFolderOwner owner = RunFolderOwner::take(dir);  // the default grace (5 s) outlasts the child
  reaper.join();
  CHECK(owner.took_over().find("pid " + std::to_string(child)) != std::string::npos);
}

TEST_CASE("run folder owner: a release never removes another owner's lock") {
  const std::string dir = test::temp_dir("owner-release");
  RunFolderOwner owner = RunFolderOwner::take(dir);
  RunFolderOwnerRecord other = this_process_as_owner();
  other.pid = gone_pid();  // someone judged us stale and took the folder
  write_lock(dir, other);
  owner.release();
  REQUIRE(std::filesystem::exists(lock_of(dir)));
  CHECK(read_lock(dir).pid == other.pid);
}

TEST_CASE("run folder owner: of concurrent takers exactly one wins") {
  SECTION("a free folder") {
    const std::string dir = test::temp_dir("owner-race-free");
    CHECK(race(dir, 8) == 1);
  }
  SECTION("a stale lock (its pid gone)") {
    const std::string dir = test::temp_dir("owner-race-stale");
    RunFolderOwnerRecord dead = this_process_as_owner();
    dead.pid = gone_pid();
    write_lock(dir, dead);
    CHECK(race(dir, 8) == 1);
    CHECK(read_lock(dir).pid != dead.pid);
  }
}
