// scale-bench's subcommands (tools/scale-bench.cpp: one binary, `scale-bench SUBCOMMAND ...`).
// Each add_*_command adds its subcommand, with its options, to the tool's app and returns it with
// the body that runs it once the command line chose it (the tool's run_tool then turns errors into
// one line and an exit code, error.hpp). See scale-bench(1).
//   collectives   under mpirun: the Communicator's and bare MPI's collectives swept over sizes
//   run           launches the training job at each W, then reports
//   report        the efficiency report of run folders (report.json, report.md, SVG plots)
//   fit, predict  the alpha-beta step model: fitted from measurements; its deterministic simulation
//   plan          every parallel layout that fits a memory budget, ranked by predicted throughput
//   compare       a benchmark declared as data (bench/specs/*.json): variants in rounds, medians, checks
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace shardtrain::scale_bench {

struct Subcommand {
  CLI::App* app = nullptr;      // owned by the parent app
  std::function<int()> run;     // the subcommand's body: its exit code
  bool needs_mpi = false;       // MPI is initialised before the body (collectives only)
};

Subcommand add_collectives_command(CLI::App& parent);
Subcommand add_run_command(CLI::App& parent);
Subcommand add_report_command(CLI::App& parent);
Subcommand add_fit_command(CLI::App& parent);
Subcommand add_predict_command(CLI::App& parent);
Subcommand add_plan_command(CLI::App& parent);
Subcommand add_compare_command(CLI::App& parent);

}  // namespace shardtrain::scale_bench
