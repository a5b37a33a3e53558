// scale-bench model subcommands (scale_bench.hpp). SCAFFOLD: replaced by the real subcommands before this reaches main.
#include "shardtrain/base/error.hpp"
#include "shardtrain/tool/scale_bench.hpp"

namespace shardtrain::scale_bench {

Subcommand add_fit_command(CLI::App& parent) {
  Subcommand c;
  c.app = parent.add_subcommand("fit", "(not built yet)");
  c.run = [] () -> int { throw UsageError("scale-bench fit: not built yet"); };
  return c;
}

Subcommand add_predict_command(CLI::App& parent) {
  Subcommand c;
  c.app = parent.add_subcommand("predict", "(not built yet)");
  c.run = [] () -> int { throw UsageError("scale-bench predict: not built yet"); };
  return c;
}

Subcommand add_plan_command(CLI::App& parent) {
  Subcommand c;
  c.app = parent.add_subcommand("plan", "(not built yet)");
  c.run = [] () -> int { throw UsageError("scale-bench plan: not built yet"); };
  return c;
}

}  // namespace shardtrain::scale_bench
