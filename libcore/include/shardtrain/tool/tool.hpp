// The shared main of every tool: parse the command line, start MPI where the tool needs it, name
// this rank in every log line, run the tool's body, and turn errors into one line and an exit code.
//
//   int main(int argc, char** argv) {
//     CLI::App app{"what the tool does"};
//     ... options ...
//     shardtrain::ToolOptions options;
//     options.needs_mpi = true;
//     return shardtrain::run_tool(app, argc, argv, options, [&] { return body(); });
//   }
//
// Exit codes (error.hpp): 0 success, 1 failure verdict, 2 usage/bad input (also CLI11 parse
// errors), 3 I/O, 4 communication, 70 internal. With several ranks, a rank that fails calls
// MPI_Abort with its code, so no peer waits forever in a collective.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace shardtrain {

struct ToolOptions {
  bool needs_mpi = false;  // initialise MPI (MPI_THREAD_MULTIPLE requested) before the body
  // Asked after parsing when set (a tool whose subcommands differ): true initialises MPI as above.
  std::function<bool()> needs_mpi_after_parse;
};

int run_tool(CLI::App& app, int argc, char** argv, ToolOptions options, const std::function<int()>& body);

// Adds the common --version flag (prints the code version and exits 0).
void add_version_flag(CLI::App& app);

}  // namespace shardtrain
