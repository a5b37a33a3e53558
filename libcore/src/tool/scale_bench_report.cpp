// scale-bench report subcommands (scale_bench.hpp). SCAFFOLD: replaced by the real subcommands before this reaches main.
#include "shardtrain/base/error.hpp"
#include "shardtrain/tool/scale_bench.hpp"

namespace shardtrain::scale_bench {

Subcommand add_run_command(CLI::App& parent) {
  Subcommand c;
  c.app = parent.add_subcommand("run", "(not built yet)");
  c.run = [] () -> int { throw UsageError("scale-bench run: not built yet"); };
  return c;
}

Subcommand add_report_command(CLI::App& parent) {
  Subcommand c;
  c.app = parent.add_subcommand("report", "(not built yet)");
  c.run = [] () -> int { throw UsageError("scale-bench report: not built yet"); };
  return c;
}

}  // namespace shardtrain::scale_bench
