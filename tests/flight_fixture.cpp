// flight_fixture: flight records for hang-diagnose's tests and benchmark, written by the project's
// own writer. The ranks of a job are threads of this process over the in-process fake transport
// (fake_transport.hpp), so the comm engine records every collective, times out and dumps exactly as
// in a real job; nothing here spells the record's format.
//
//   flight_fixture healthy DIR [JOB_ID]   2 ranks: AllReduce seq 1..4 completed in group dp (steps
//                                         1..4), then each rank dumps on request (reason requested).
//   flight_fixture skip DIR               2 ranks: seq 1..4 completed; rank 1 skips seq 5 (fault
//                                         injection), both time out in it (rank 0 waiting on rank 1).
//   flight_fixture killed DIR             4 ranks: seq 1..4 completed; rank 3 stops before seq 5 and
//                                         writes nothing, ranks 0-2 time out in seq 5.
//   flight_fixture bench DIR [ENTRIES]    8 ranks, groups dp (all 8) and tp (pairs), ENTRIES (default
//                                         1000) operations each (dp's first is the split); rank 5
//                                         does not submit dp's last one and every other rank times
//                                         out in it: 8 records of 2 x ENTRIES entries (rank 5's one
//                                         fewer), for bench/specs/hang-diagnose.json.
// Each writes DIR/flight.rank<R>.json (DIR created) with job id JOB_ID (default job-1) and exits 0;
// a bad command line exits 2 with one line.
#include <barrier>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm_engine_test_support.hpp"  // failing_options: 200 ms timeouts, little grace
#include "fake_transport.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/fault_injection.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/comm/transport.hpp"

using namespace shardtrain;

namespace {

std::string record_path(const std::string& dir, int rank) { return dir + "/flight.rank" + std::to_string(rank) + ".json"; }

// `count` all-reduces of 256 floats on `comm`, at steps first_step, first_step + 1, ...
void all_reduces(Communicator& comm, int count, int first_step = 1) {
  std::vector<float> grads(256, 1.0f);
  for (int i = 0; i < count; ++i) {
    comm.set_step(first_step + i);
    comm.all_reduce(grads.data(), grads.size());
  }
}

// The collective that does not complete; its timeout writes the record (and throws, expected).
void time_out_in(Communicator& comm, int step) {
  comm.set_step(step);
  float x = 1.0f;
  try {
    comm.all_reduce(&x, 1);
  } catch (const CommunicationError&) {
  }
}

void healthy(const std::string& dir) {
  const int W = 2;
  auto world = std::make_shared<test::FakeWorld>(W);
  std::barrier done(W);
  test::run_ranks(W, [&](int r) {
    auto dp = make_communicator(world->transport(r), comm_engine_test::failing_options("dp", dir));
    all_reduces(*dp, 4);
    done.arrive_and_wait();  // both completed seq 4 before either dumps
    write_flight_record(record_path(dir, r), r, W, "requested", nullptr);
  });
}

void skip(const std::string& dir) {
  const int W = 2;
  auto world = std::make_shared<test::FakeWorld>(W);
  test::run_ranks(W, [&](int r) {
    auto dp = make_communicator(world->transport(r), comm_engine_test::failing_options("dp", dir));
    dp->set_fault_injection(FaultInjection::parse({"skip-collective:rank=1,step=5"}));
    all_reduces(*dp, 4);
    time_out_in(*dp, 5);
  });
}

void killed(const std::string& dir) {
  const int W = 4;
  auto world = std::make_shared<test::FakeWorld>(W);
  test::run_ranks(W, [&](int r) {
    auto dp = make_communicator(world->transport(r), comm_engine_test::failing_options("dp", dir));
    all_reduces(*dp, 4);
    if (r == 3) return;  // "killed": no seq 5, no record
    time_out_in(*dp, 5);
  });
}

void bench(const std::string& dir, int entries) {
  const int W = 8;
  auto world = std::make_shared<test::FakeWorld>(W);
  test::run_ranks(W, [&](int r) {
    auto dp = make_communicator(world->transport(r), comm_engine_test::failing_options("dp", dir));
    auto tp = dp->split(r / 2, r, "tp", Phase::kForward);  // dp's seq 1
    all_reduces(*tp, entries);
    all_reduces(*dp, entries - 2);  // with the split, entries - 1 operations in dp: all complete
    if (r == 5) {
      // Not submitted: rank 5 stays out of dp's last collective. Its own record comes on request,
      // after the others' timeouts, as a signal's dump would.
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      write_flight_record(record_path(dir, r), r, W, "signal", nullptr);
      return;
    }
    time_out_in(*dp, entries - 1);  // dp's seq `entries`
  });
}

int usage(const std::string& why) {
  std::fprintf(stderr, "flight_fixture: %s; usage: flight_fixture healthy|skip|killed|bench DIR [JOB_ID|ENTRIES]\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) return usage("expected a scenario and a folder");
  const std::string scenario = argv[1], dir = argv[2], extra = argc == 4 ? argv[3] : "";
  int entries = 1000;
  if (scenario == "bench" && !extra.empty()) {
    try {
      entries = std::stoi(extra);
    } catch (const std::exception&) {
      entries = -1;
    }
    if (entries < 2 || entries > 2000) return usage("ENTRIES must be a number in [2, 2000] (the ring holds 2048)");
  } else if (scenario != "healthy" && scenario != "skip" && scenario != "killed" && scenario != "bench") {
    return usage("unknown scenario '" + scenario + "'");
  } else if (!extra.empty() && scenario != "healthy") {
    return usage(scenario + " takes no third argument");
  }
  set_flight_job_id(scenario == "bench" ? "bench" : extra.empty() ? "job-1" : extra);
  const PhaseScope phase(Phase::kBackward);
  try {
    std::filesystem::create_directories(dir);
    if (scenario == "healthy") healthy(dir);
    if (scenario == "skip") skip(dir);
    if (scenario == "killed") killed(dir);
    if (scenario == "bench") bench(dir, entries);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flight_fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
