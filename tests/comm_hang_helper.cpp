// comm_hang_helper: the end-to-end "no silent hang" check of contract 6 of docs/ARCHITECTURE.md, run by ctest
// (comm_hang_np2, comm_hang_np4; see the comm block at the end of tests/CMakeLists.txt).
//
//   comm_hang_helper --check MPIEXEC NP DIR    launches NP ranks of itself under MPIEXEC and checks
//                                              that the job ends non-zero within timeout + 10 s and
//                                              that every rank wrote DIR/flight.rank<R>.json, the
//                                              skipping rank one sequence number behind. Exit 0 = pass.
//   comm_hang_helper --rank DIR                one rank: like a trainer, an all-reduce per step with
//                                              skip-collective:rank=W-1,step=1 injected; rank W-1 then
//                                              blocks in an MPI_Barrier nobody else enters ("stuck
//                                              elsewhere"), the others wait on the collective.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/tool/tool.hpp"

namespace {

constexpr int kTimeoutMs = 1000;

int rank_main(int argc, char** argv, const std::string& dir) {
  CLI::App app{"comm_hang_helper rank"};
  app.allow_extras();
  shardtrain::ToolOptions tool_options;
  tool_options.needs_mpi = true;
  return shardtrain::run_tool(app, argc, argv, tool_options, [&] {
    shardtrain::CommOptions o;
    o.name = "dp";
    o.timeout = std::chrono::milliseconds(kTimeoutMs);
    o.run_dir = dir;
    o.on_fatal = shardtrain::mpi_abort_on_fatal();
    auto comm = shardtrain::make_mpi_communicator(MPI_COMM_WORLD, o);
    const int W = comm->size();
    comm->set_fault_injection(
        shardtrain::FaultInjection::parse({"skip-collective:rank=" + std::to_string(W - 1) + ",step=1"}));
    std::vector<float> grads(4096, 1.0f);
    for (int step = 0; step < 3; ++step) {
      comm->set_step(step);
      auto h = comm->all_reduce_async(grads.data(), grads.size());
      if (step == 1 && comm->rank() == W - 1) MPI_Barrier(MPI_COMM_WORLD);  // stuck elsewhere
      h.wait();
    }
    return 0;
  });
}

int check_main(const std::string& mpiexec, int np, const std::string& self, const std::string& dir) {
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "' && '" + mpiexec + "' -np " + std::to_string(np) +
                    " --oversubscribe '" + self + "' --rank '" + dir + "'";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    failures += ok ? 0 : 1;
  };
  expect(rc != 0, "job exit status is non-zero (" + std::to_string(rc) + ")");
  expect(elapsed < kTimeoutMs / 1000.0 + 10.0, "job ended within timeout + 10 s (" + std::to_string(elapsed) + " s)");
  for (int r = 0; r < np; ++r) {
    const std::string path = dir + "/flight.rank" + std::to_string(r) + ".json";
    std::ifstream in(path);
    expect(in.good(), path + " exists");
    if (!in.good()) continue;
    const auto j = nlohmann::json::parse(in);
    expect(j["timed_out_group"] == "dp", "rank " + std::to_string(r) + ": timed_out_group = " + j["timed_out_group"].dump());
    nlohmann::json g;  // the "dp" group among every group of the rank
    for (const auto& group : j["groups"])
      if (group["name"] == "dp") g = group;
    expect(g.is_object(), "rank " + std::to_string(r) + ": the record holds group dp");
    if (!g.is_object()) continue;
    const int want = r == np - 1 ? 1 : 2;  // seq 1 = step 0; seq 2 = step 1, skipped by rank np-1
    expect(g["last_started_seq"] == want, "rank " + std::to_string(r) + ": last_started_seq = " +
                                              g["last_started_seq"].dump() + " (expected " + std::to_string(want) +
                                              (r == np - 1 ? ": the skipping rank, one behind)" : ")"));
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--rank") return rank_main(argc, argv, argv[2]);
  if (argc == 5 && std::string(argv[1]) == "--check") return check_main(argv[2], std::atoi(argv[3]), argv[0], argv[4]);
  std::fprintf(stderr, "usage: comm_hang_helper --check MPIEXEC NP DIR | --rank DIR\n");
  return 2;
}
