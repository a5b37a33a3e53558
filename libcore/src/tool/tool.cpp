#include "shardtrain/tool/tool.hpp"

#include <cstdio>
#include <exception>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/tool/numbers.hpp"

namespace shardtrain {

void add_version_flag(CLI::App& app) {
  app.set_version_flag("--version", std::string("shardtrain ") + code_version());
}

int run_tool(CLI::App& app, int argc, char** argv, ToolOptions options, const std::function<int()>& body) {
  check_numbers_strictly(app);
  // A refused command line is one line, as every other error of the tools: CLI11's own message
  // (it names the option) and where to look, instead of its two.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + " (see --help)\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0 in CLI11.
    const int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  }
  MpiProcess mpi;
  if (options.needs_mpi_after_parse) options.needs_mpi = options.needs_mpi || options.needs_mpi_after_parse();
  if (options.needs_mpi) {
    mpi = mpi_start(argc, argv);
    set_log_identity(mpi.rank, mpi.size);
  }
  int code = 0;
  try {
    code = body();
  } catch (const Error& e) {
    log_line(std::string("error: ") + e.what());
    code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    log_line(std::string("internal error: ") + e.what() + " (please report this)");
    code = static_cast<int>(ExitCode::kInternal);
  }
  if (options.needs_mpi) mpi_end(code, mpi.size);
  return code;
}

}  // namespace shardtrain
