// The comm engine's failures over the in-process fake transport (fake_transport.hpp), no MPI: a
// collective timeout with the flight record it writes, disagreeing lengths and a wrong count failing
// every rank together, and skip-collective injection with its phase= and group= selectors. Timeouts
// are 200 ms, so every case takes well under a second. (test_comm_engine.cpp: the collectives.)
#include <catch2/catch.hpp>

#include <barrier>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_transport.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/fault_injection.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/comm/transport.hpp"
#include "comm_engine_test_support.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using std::chrono::milliseconds;
using namespace comm_engine_test;

TEST_CASE("comm engine: a timeout names the operation and dumps every group of the rank", "[comm]") {
  const int W = 2;
  const std::string dir = test::temp_dir("engine-timeout");
  struct Seen {
    std::string error, later_error;
    int code = 0;
    bool dp_failed = false, ckpt_failed = true;
    double waited_s = 0;
  };
  std::vector<Seen> seen(W);
  auto world = std::make_shared<test::FakeWorld>(W);
  std::barrier sync(W);
  PhaseScope phase(Phase::kBackward);
  test::run_ranks(W, [&](int r) {
    Seen& s = seen[std::size_t(r)];
    auto dp = make_communicator(world->transport(r), failing_options("dp", dir));
    auto ckpt = dp->split(0, r, "ckpt", Phase::kCheckpoint);  // dp seq 1
    ckpt->barrier();
    dp->set_step(1);
    std::vector<float> grads(64, 1.0f);
    dp->all_reduce(grads.data(), grads.size());  // seq 2: completes
    sync.arrive_and_wait();
    if (r == 0) world->withhold(1);  // from now on rank 1's messages are lost
    sync.arrive_and_wait();
    dp->set_step(2);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      dp->all_reduce(grads.data(), grads.size());  // seq 3: never completes
    } catch (const CommunicationError& e) {
      s.error = e.what();
      s.code = int(e.code());
    }
    s.waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.dp_failed = dp->failed();
    s.ckpt_failed = ckpt->failed();
    try {
      dp->barrier();
    } catch (const CommunicationError& e) {
      s.later_error = e.what();
    }
  });
  for (int r = 0; r < W; ++r) {
    INFO("rank " << r);
    const Seen& s = seen[std::size_t(r)];
    CHECK_THAT(s.error, Catch::StartsWith("collective timeout: AllReduce(seq=3, group=dp, numel=64, bytes=256, "
                                          "timeout_ms=200) after 0.") &&
                            Catch::EndsWith("flight record: " + dir + "/flight.rank" + std::to_string(r) + ".json"));
    CHECK(s.code == int(ExitCode::kCommunication));
    CHECK(s.waited_s >= 0.19);
    CHECK(s.waited_s < 2.0);
    CHECK(s.dp_failed);
    CHECK_FALSE(s.ckpt_failed);   // another group of the rank is unaffected
    CHECK(s.later_error == s.error);  // a failed communicator stays failed, with the first message

    const auto j = read_json(dir + "/flight.rank" + std::to_string(r) + ".json");
    CHECK(j["format"] == "shardtrain-flight-record");
    CHECK(j["format_version"] == 3);
    CHECK(j["rank"] == r);
    REQUIRE(j["triggers"].size() == 1);  // this rank's only dump so far
    CHECK(j["triggers"][0]["reason"] == "timeout");
    CHECK(j["triggers"][0]["trigger"] == j["trigger"]);
    CHECK(j["now"]["phase"] == "backward");  // the process-wide phase the test set
    CHECK(j["phases"].back()["phase"] == "backward");
    CHECK(j["world_size"] == W);
    CHECK(j["reason"] == "timeout");
    CHECK(j["timed_out_group"] == "dp");
    CHECK(j["trigger"]["group"] == "dp");
    CHECK(j["trigger"]["seq"] == 3);
    CHECK(j["trigger"]["op"] == "AllReduce");
    CHECK(j["trigger"]["step"] == 2);
    CHECK(j["trigger"]["phase"] == "backward");
    CHECK(j["trigger"]["skipped_by_fault_injection"] == false);
    CHECK(group_names(j) == std::vector<std::string>{"dp", "ckpt"});
    const auto dp = group_of(j, "dp");
    CHECK(dp["phase"].is_null());
    CHECK(dp["last_enqueued_seq"] == 3);
    CHECK(dp["last_started_seq"] == 3);
    CHECK(dp["last_completed_seq"] == 2);
    const auto& last = dp["entries"].back();
    CHECK(last["seq"] == 3);
    CHECK(last["state"] == "timed_out");
    CHECK(last["phase"] == "backward");
    CHECK(last["step"] == 2);
    CHECK(last["numel"] == 64);
    const auto ckpt = group_of(j, "ckpt");
    CHECK(ckpt["phase"] == "ckpt");
    CHECK(ckpt["last_completed_seq"] == 1);
    CHECK(ckpt["entries"].back()["op"] == "Barrier");
    CHECK(ckpt["entries"].back()["phase"] == "ckpt");
    CHECK(ckpt["entries"].back()["state"] == "completed");
  }
}

TEST_CASE("comm engine: ranks that disagree on a broadcast's length fail together before any data moves", "[comm]") {
  // Two ranks, no majority: both fail the group with the same kind of message listing both headers,
  // and the receiving rank's buffer is untouched (the check runs before the data).
  const std::string dir = test::temp_dir("engine-transport-error");
  std::vector<std::string> errors(2);
  std::vector<char> failed(2, 0);  // not vector<bool>: its bits share a word, which two rank threads would race on
  std::vector<float> received;
  auto world = std::make_shared<test::FakeWorld>(2);
  test::run_ranks(2, [&](int r) {
    auto dp = make_communicator(world->transport(r), failing_options("dp", dir));
    dp->set_step(7);
    std::vector<float> data(r == 0 ? 8 : 4, r == 0 ? 1.0f : 5.0f);
    try {
      dp->broadcast(data.data(), data.size(), 0);
    } catch (const CommunicationError& e) {
      errors[std::size_t(r)] = e.what();
    }
    failed[std::size_t(r)] = dp->failed();
    if (r == 1) received = data;
  });
  CHECK_THAT(errors[1], Catch::StartsWith("collective failed: Broadcast(seq=1, group=dp, numel=4, ") &&
                            Catch::Contains("no header has a majority: world rank 0 Broadcast seq 1 of 8 float32 "
                                            "elements (root 0); world rank 1 Broadcast seq 1 of 4 float32") &&
                            Catch::EndsWith("flight record: " + dir + "/flight.rank1.json"));
  CHECK_THAT(errors[0], Catch::StartsWith("collective failed: Broadcast(seq=1, group=dp, numel=8, "));
  CHECK(failed[0]);
  CHECK(failed[1]);
  CHECK(received == std::vector<float>(4, 5.0f));
  const auto j = read_json(dir + "/flight.rank1.json");
  CHECK(j["reason"] == "error");
  CHECK(j["timed_out_group"] == "dp");
  CHECK(j["trigger"]["seq"] == 1);
  CHECK(j["trigger"]["step"] == 7);
  CHECK(j["trigger"]["detected_by"] == "agreement");
  CHECK(j["trigger"]["agreement"]["majority"] == false);
  CHECK(j["trigger"]["agreement"]["headers"][0]["numel"] == 8);
  CHECK(j["trigger"]["agreement"]["headers"][1]["numel"] == 4);
  CHECK(group_of(j, "dp")["entries"].back()["state"] == "aborted");
}

TEST_CASE("comm engine: a wrong count on one of three ranks fails every rank at once, the others call its input untrusted",
          "[comm]") {
  // Library collectives (the fake's reduce-scatter and all-reduce, as MPI's at W = 3) do not check
  // sizes themselves: the header exchange must. Rank 1 is one element short (the wrong-count fault).
  // Every rank fails well within the collective timeout (no one waits for it), with a record whose
  // trigger lists every header; ranks 0 and 2 name rank 1 as the source of untrusted input, rank 1
  // says its own header is the odd one, and no rank's output was written.
  for (const bool reduce_scatter : {true, false}) {
    DYNAMIC_SECTION((reduce_scatter ? "ReduceScatter" : "AllReduce")) {
      const int W = 3;
      forget_flight_triggers();  // earlier dumps of these ranks
      const std::string dir = test::temp_dir(std::string("engine-agreement-") + (reduce_scatter ? "rs" : "ar"));
      std::vector<std::string> errors(W);
      std::vector<double> took(W);
      std::vector<char> untouched(W, 0);  // one byte per rank thread (vector<bool> packs them into one word)
      auto world = std::make_shared<test::FakeWorld>(W);
      test::run_ranks(W, [&](int r) {
        CommOptions o = failing_options("dp", dir);
        o.timeout = milliseconds(20000);  // the failure must not come from a timeout
        auto dp = make_communicator(world->transport(r), o);
        FaultInjection f;
        f.add("wrong-count:rank=1,step=2");
        dp->set_fault_injection(f);
        dp->set_step(2);
        const std::size_t block = 6;
        std::vector<float> in(block * W, 1.0f), out(block, -1.0f);
        const auto t0 = std::chrono::steady_clock::now();
        try {
          if (reduce_scatter) dp->reduce_scatter(in.data(), out.data(), block);
          else dp->all_reduce(out.data(), out.size());
        } catch (const CommunicationError& e) {
          errors[std::size_t(r)] = e.what();
        }
        took[std::size_t(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        untouched[std::size_t(r)] = out == std::vector<float>(block, -1.0f);
      });
      const std::string op = reduce_scatter ? "ReduceScatter" : "AllReduce";
      for (int r : {0, 2}) {
        CHECK_THAT(errors[std::size_t(r)], Catch::Contains("untrusted input from world rank(s) 1: world rank 1 has " + op +
                                                           " seq 1 of 5 float32 elements, this rank and the majority " +
                                                           op + " seq 1 of 6 float32 elements"));
        const auto j = read_json(dir + "/flight.rank" + std::to_string(r) + ".json");
        CHECK(j["trigger"]["agreement"]["untrusted_input_from"] == nlohmann::json::array({1}));
        CHECK(j["trigger"]["agreement"]["disagreeing_world_ranks"] == nlohmann::json::array({1}));
      }
      CHECK_THAT(errors[1], Catch::Contains("this rank's " + op + " seq 1 of 5 float32 elements disagrees with the "
                                            "majority's " + op + " seq 1 of 6 float32 elements"));
      const auto j1 = read_json(dir + "/flight.rank1.json");
      CHECK(j1["reason"] == "error");
      CHECK_FALSE(j1["trigger"]["agreement"].contains("untrusted_input_from"));
      for (int r = 0; r < W; ++r) {
        CHECK(took[std::size_t(r)] < 5.0);  // the teardown grace (20 ms) plus scheduling, not the 20 s timeout
        CHECK(untouched[std::size_t(r)]);
      }
      forget_flight_triggers();
    }
  }
}

TEST_CASE("comm engine: skip-collective with group= and phase= skips one collective of a split group", "[comm]") {
  const int W = 2;
  const std::string dir = test::temp_dir("engine-skip-group");
  struct Seen {
    std::string dp_error, ckpt_error;
    std::int64_t ckpt_step = 0;
  };
  std::vector<Seen> seen(W);
  auto world = std::make_shared<test::FakeWorld>(W);
  PhaseScope phase(Phase::kForward);
  test::run_ranks(W, [&](int r) {
    Seen& s = seen[std::size_t(r)];
    auto dp = make_communicator(world->transport(r), failing_options("dp", dir));
    // Set on the parent before the split: the child inherits it (and the step).
    dp->set_fault_injection(FaultInjection::parse({"skip-collective:rank=1,step=3,phase=ckpt,group=ckpt"}));
    dp->set_step(3);
    auto ckpt = dp->split(0, r, "ckpt", Phase::kCheckpoint);  // dp seq 1, step 3, phase forward: not selected
    s.ckpt_step = ckpt->step();
    float x = 1.0f, y = 1.0f;
    try {
      dp->all_reduce(&x, 1);  // dp seq 2, step 3, phase forward: not selected
    } catch (const CommunicationError& e) {
      s.dp_error = e.what();
    }
    try {
      ckpt->all_reduce(&y, 1);  // ckpt seq 1, step 3, phase ckpt: rank 1 skips it
    } catch (const CommunicationError& e) {
      s.ckpt_error = e.what();
    }
  });
  for (int r = 0; r < W; ++r) {
    INFO("rank " << r);
    const Seen& s = seen[std::size_t(r)];
    CHECK(s.ckpt_step == 3);
    CHECK(s.dp_error.empty());
    CHECK_THAT(s.ckpt_error, Catch::StartsWith("collective timeout: AllReduce(seq=1, group=ckpt, numel=1, bytes=4, timeout_ms=200)"));
    CHECK((s.ckpt_error.find("(this rank skipped it: fault injection)") != std::string::npos) == (r == 1));
    const auto j = read_json(dir + "/flight.rank" + std::to_string(r) + ".json");
    CHECK(j["timed_out_group"] == "ckpt");
    CHECK(j["trigger"]["phase"] == "ckpt");
    CHECK(j["trigger"]["step"] == 3);
    CHECK(j["trigger"]["skipped_by_fault_injection"] == (r == 1));
    const auto dp = group_of(j, "dp");
    CHECK(dp["last_completed_seq"] == 2);
    CHECK(dp["entries"].back()["state"] == "completed");
    const auto ckpt = group_of(j, "ckpt");
    CHECK(ckpt["last_enqueued_seq"] == 1);
    CHECK(ckpt["last_started_seq"] == (r == 1 ? 0 : 1));  // the skipping rank is one behind
    CHECK(ckpt["entries"].back()["state"] == (r == 1 ? "skipped" : "timed_out"));
  }
}

TEST_CASE("comm engine: skip-collective with phase= waits for that process-wide phase, an unmatched selector skips nothing",
          "[comm]") {
  const int W = 2;
  const std::string dir = test::temp_dir("engine-skip-phase");
  struct Seen {
    std::string forward_error, backward_error, other_error;
  };
  std::vector<Seen> seen(W);
  auto world = std::make_shared<test::FakeWorld>(W);
  std::barrier sync(W);
  PhaseScope phase(Phase::kForward);
  test::run_ranks(W, [&](int r) {
    Seen& s = seen[std::size_t(r)];
    // A selector that matches no group: everything completes.
    auto other = make_communicator(world->transport(r), failing_options("other", dir));
    other->set_fault_injection(FaultInjection::parse({"skip-collective:rank=0,step=5,group=tp"}));
    other->set_step(5);
    float z = 1.0f;
    try {
      other->all_reduce(&z, 1);
      other->barrier();
    } catch (const CommunicationError& e) {
      s.other_error = e.what();
    }
    auto dp = make_communicator(world->transport(r), failing_options("dp", dir));
    dp->set_fault_injection(FaultInjection::parse({"skip-collective:rank=0,step=5,phase=backward"}));
    dp->set_step(5);
    float x = 1.0f;
    try {
      dp->all_reduce(&x, 1);  // forward: not selected
    } catch (const CommunicationError& e) {
      s.forward_error = e.what();
    }
    sync.arrive_and_wait();
    if (r == 0) set_phase(Phase::kBackward);  // the trainer's thread moving on, for every rank here
    sync.arrive_and_wait();
    try {
      dp->all_reduce(&x, 1);  // backward: rank 0 skips it
    } catch (const CommunicationError& e) {
      s.backward_error = e.what();
    }
  });
  for (int r = 0; r < W; ++r) {
    INFO("rank " << r);
    const Seen& s = seen[std::size_t(r)];
    CHECK(s.other_error.empty());
    CHECK(s.forward_error.empty());
    CHECK_THAT(s.backward_error, Catch::StartsWith("collective timeout: AllReduce(seq=2, group=dp,"));
    const auto j = read_json(dir + "/flight.rank" + std::to_string(r) + ".json");
    CHECK(j["timed_out_group"] == "dp");
    CHECK(j["trigger"]["phase"] == "backward");
    CHECK(j["trigger"]["skipped_by_fault_injection"] == (r == 0));
    CHECK(group_names(j) == std::vector<std::string>{"other", "dp"});
    const auto dp = group_of(j, "dp");
    CHECK(dp["entries"][0]["phase"] == "forward");
    CHECK(dp["entries"][0]["state"] == "completed");
    CHECK(dp["entries"][1]["phase"] == "backward");
    CHECK(dp["entries"][1]["state"] == (r == 0 ? "skipped" : "timed_out"));
    CHECK(group_of(j, "other")["last_completed_seq"] == 2);
  }
}
