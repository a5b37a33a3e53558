#include "shardtrain/tool/tool.hpp"

#include <mpi.h>

#include <cstdio>
#include <exception>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"

namespace shardtrain {

void add_version_flag(CLI::App& app) {
  app.set_version_flag("--version", std::string("shardtrain ") + code_version());
}

int run_tool(CLI::App& app, int argc, char** argv, ToolOptions options, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0 in CLI11.
    const int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  }
  int world = 1, rank = 0;
  if (options.needs_mpi_after_parse) options.needs_mpi = options.needs_mpi || options.needs_mpi_after_parse();
  if (options.needs_mpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    set_log_identity(rank, world);
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
  if (options.needs_mpi) {
    if (code != 0 && world > 1) MPI_Abort(MPI_COMM_WORLD, code);
    MPI_Finalize();
  }
  return code;
}

}  // namespace shardtrain
