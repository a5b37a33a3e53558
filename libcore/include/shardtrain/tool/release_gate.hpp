// release-gate's subcommands (tools/release-gate.cpp: one binary, `release-gate SUBCOMMAND ...`),
// each with its options and its body, like scale-bench's (scale_bench.hpp). See release-gate(1).
//   eval      evaluate a checkpoint on the temporal hold-out: JSON, Markdown, reliability diagram
//   baseline  fit, evaluate and register a named n-gram baseline of the training selection
//   decide    evaluate, compare with a baseline under a policy, score the rubric, record the decision
//   history   list the registry's release records, rollbacks (and baselines, last-known-good);
//             --at T: what was in service at T, and why
//   monitor   score the release in service on matured documents; roll it back when the policy says so
//   review    sign off a decision that needed a person
//   costs     measure a pipeline run's cost table
#pragma once
#include <CLI/CLI.hpp>

#include "shardtrain/tool/scale_bench.hpp"

namespace shardtrain::release_gate {

using Subcommand = scale_bench::Subcommand;

Subcommand add_eval_command(CLI::App& parent);
Subcommand add_baseline_command(CLI::App& parent);
Subcommand add_decide_command(CLI::App& parent);
Subcommand add_history_command(CLI::App& parent);
Subcommand add_costs_command(CLI::App& parent);
Subcommand add_monitor_command(CLI::App& parent);
Subcommand add_review_command(CLI::App& parent);

}  // namespace shardtrain::release_gate
