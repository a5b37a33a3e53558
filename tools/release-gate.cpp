// release-gate: evaluate a checkpoint beyond its loss (hold-out slices, calibration, latency), score
// the release rubric, record the decision in a registry and keep the last known-good release.
// Options + one call per subcommand into libcore (shardtrain/tool/release_gate.hpp). See release-gate(1).
#include <vector>

#include <CLI/CLI.hpp>

#include "shardtrain/tool/release_gate.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace rg = shardtrain::release_gate;
  CLI::App app{"Evaluate a checkpoint on the temporal hold-out (loss, slices with bootstrap intervals, calibration,\n"
               "latency), compare it with a named baseline or the last known-good release under a versioned policy,\n"
               "score the evidence rubric and record the decision; monitor the release in service on matured documents\n"
               "and roll it back when the policy says so. decide exits 0 promote, 1 reject, 2 unusable input;\n"
               "monitor 0 keep, 1 rolled back, 2 cannot score.",
               "release-gate"};
  app.require_subcommand(1);
  const std::vector<rg::Subcommand> commands = {rg::add_eval_command(app), rg::add_baseline_command(app),
                                                rg::add_decide_command(app), rg::add_history_command(app),
                                                rg::add_monitor_command(app), rg::add_review_command(app),
                                                rg::add_costs_command(app)};
  shardtrain::add_version_flag(app);
  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
    return 2;  // unreachable: require_subcommand(1)
  });
}
