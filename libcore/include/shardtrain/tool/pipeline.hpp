// The pipeline tool's options (tools/pipeline.cpp: `pipeline ...` runs the release chain, `pipeline
// cycles ...` the continual release cycles, `pipeline evidence RUN` a run's release evidence) and its dispatch into the pipeline layer
// (pipeline/pipeline.hpp run_chain_command, pipeline/cycles.hpp run_cycles_command). See pipeline(1).
#pragma once
#include <CLI/CLI.hpp>

#include "shardtrain/pipeline/cycles.hpp"
#include "shardtrain/pipeline/evidence.hpp"
#include "shardtrain/pipeline/stage_graph.hpp"

namespace shardtrain::pipeline_tool {

// The release chain's options on `app`, into `args` (which must outlive the parse). An option
// given again wins (CLI::MultiOptionPolicy::TakeLast, set here for every option added after).
void add_chain_options(CLI::App& app, pipeline::PipelineArgs& args);

// The `cycles` subcommand of `app` with its options, into `args` (which must outlive the parse).
CLI::App& add_cycles_command(CLI::App& app, pipeline::CyclesArgs& args);

// The `evidence` subcommand of `app` with its options, into `args` (which must outlive the parse).
CLI::App& add_evidence_command(CLI::App& app, pipeline::EvidenceArgs& args);

// The subcommands as added, with the arguments they parse into.
struct Subcommands {
  const CLI::App& cycles;
  const pipeline::CyclesArgs& cycles_args;
  const CLI::App& evidence;
  const pipeline::EvidenceArgs& evidence_args;
};

// The tool's main after its options: parses through run_tool (tool.hpp), then runs `cycles` or
// `evidence` (refusing any option of the chain given with either: UsageError, exit 2) or the
// chain, the args as parsed; this command line (argv after the program) is what each stage job
// runs again. Returns the exit code.
int run_pipeline_tool(CLI::App& app, const Subcommands& subcommands, const pipeline::PipelineArgs& chain_args, int argc,
                      char** argv);

}  // namespace shardtrain::pipeline_tool
