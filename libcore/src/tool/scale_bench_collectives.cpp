// scale-bench collectives subcommands (scale_bench.hpp). SCAFFOLD: replaced by the real subcommands before this reaches main.
#include "shardtrain/base/error.hpp"
#include "shardtrain/tool/scale_bench.hpp"

namespace shardtrain::scale_bench {

Subcommand add_collectives_command(CLI::App& parent) {
  Subcommand c;
  c.app = parent.add_subcommand("collectives", "(not built yet)");
  c.run = [] () -> int { throw UsageError("scale-bench collectives: not built yet"); };
  return c;
}

}  // namespace shardtrain::scale_bench
