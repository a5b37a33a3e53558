// scale-bench: the 1/2/4/8-rank efficiency report, its collectives sweep, a calibrated scaling model
// and a parallelism planner, as subcommands of one binary (shardtrain/tool/scale_bench.hpp). Options +
// one call per subcommand into libcore. See scale-bench(1).
#include <vector>

#include <CLI/CLI.hpp>

#include "shardtrain/tool/scale_bench.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace sb = shardtrain::scale_bench;
  CLI::App app{"Scaling efficiency E(W) = throughput_W / (W x throughput_1): measure collectives, run and report a\n"
               "job at 1/2/4/8 ranks, fit and predict a step model, plan a parallel layout; run a declared benchmark.",
               "scale-bench"};
  app.require_subcommand(1);
  const std::vector<sb::Subcommand> commands = {sb::add_collectives_command(app), sb::add_run_command(app),
                                                sb::add_report_command(app),      sb::add_fit_command(app),
                                                sb::add_predict_command(app),     sb::add_plan_command(app),
                                                sb::add_compare_command(app)};
  shardtrain::add_version_flag(app);
  auto chosen = [&]() -> const sb::Subcommand& {
    for (const auto& c : commands)
      if (c.app->parsed()) return c;
    return commands.front();  // unreachable: require_subcommand(1)
  };
  shardtrain::ToolOptions options;
  options.needs_mpi_after_parse = [&] { return chosen().needs_mpi; };
  return shardtrain::run_tool(app, argc, argv, options, [&] { return chosen().run(); });
}
