// pipeline: the release chain as a user runs it (data-prep, the kill-and-resume proof, baseline,
// twin, equiv-check, the main run, scale points, the scaling report, release-gate decide, costs),
// as Slurm jobs chained by dependencies or here with --local; one stage with --stage. `pipeline
// cycles`: continual release cycles under an arrival pattern, here or with --slurm as one chain.
// `pipeline evidence RUN`: the release evidence of a run made outside the chain.
// Options + one call into libcore (shardtrain/tool/pipeline.hpp). See pipeline(1).
#include <CLI/CLI.hpp>

#include "shardtrain/tool/pipeline.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace pipeline = shardtrain::pipeline;
  namespace pipeline_tool = shardtrain::pipeline_tool;
  CLI::App app{"The release chain, producing its own evidence: data-prep, the kill-and-resume proof, a W=1 baseline,\n"
               "a deterministic twin, equiv-check, the main run, extra scale points, the scaling report, release-gate\n"
               "decide, then a cost table; all under ROOT/run/NAME. As Slurm jobs chained by dependencies (afterok;\n"
               "costs afterany), or one after the other here with --local; one stage with --stage. Exit 0 the chain\n"
               "ran (--local) or was submitted; 1 a stage failed (with --local or --stage: its own status); 2 a usage\n"
               "error or a job that cannot run here. `pipeline cycles --help`: continual release cycles; `pipeline\n"
               "evidence --help`: the release evidence of a run made outside the chain.",
               "pipeline"};
  pipeline::PipelineArgs chain_args;
  pipeline::CyclesArgs cycles_args;
  pipeline_tool::add_chain_options(app, chain_args);
  shardtrain::add_version_flag(app);
  pipeline::EvidenceArgs evidence_args;
  const CLI::App& cycles = pipeline_tool::add_cycles_command(app, cycles_args);
  const CLI::App& evidence = pipeline_tool::add_evidence_command(app, evidence_args);
  return pipeline_tool::run_pipeline_tool(app, {cycles, cycles_args, evidence, evidence_args}, chain_args, argc, argv);
}
