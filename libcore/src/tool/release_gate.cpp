#include "shardtrain/tool/release_gate.hpp"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/decision/cost_accounting.hpp"
#include "shardtrain/decision/decision.hpp"
#include "shardtrain/decision/registry.hpp"
#include "shardtrain/decision/registry_history.hpp"
#include "shardtrain/decision/registry_time.hpp"
#include "shardtrain/decision/report.hpp"
#include "shardtrain/decision/service_timeline.hpp"
#include "shardtrain/monitor/monitor.hpp"
#include "shardtrain/scaling/report.hpp"

namespace shardtrain::release_gate {
namespace {

// The bootstrap intervals' options (every command that scores a hold-out).
void add_bootstrap_options(CLI::App* app, BootstrapSettings& b) {
  app->add_option("--bootstrap-resamples", b.resamples, "Bootstrap resamples per interval")->capture_default_str();
  app->add_option("--seed", b.seed, "Bootstrap seed")->capture_default_str();
}

// Options every evaluation shares (eval, decide).
void add_eval_options(CLI::App* app, ReleaseEvalOptions& o) {
  app->add_option("--batch", o.batch, "Sequences per forward while scoring")->capture_default_str();
  app->add_option("--threads", o.threads, "CPU threads")->capture_default_str();
  app->add_option("--latency-batch", o.latency_batch, "Sequences per forward in the latency probe")->capture_default_str();
  app->add_option("--latency-runs", o.latency_runs, "Timed forwards in the latency probe (p50/p99)")->capture_default_str();
  add_bootstrap_options(app, o.holdout.bootstrap);
  app->add_option("--summary", o.summary_path, "The training run's summary.json (default: <CKPT>/../../summary.json)");
}

void print_json(const std::string& path, const nlohmann::json& j) {
  if (path == "-") std::cout << j.dump(2) << std::endl;
  else if (!path.empty()) write_json_file(path, j);
}

}  // namespace

Subcommand add_eval_command(CLI::App& parent) {
  struct Args {
    std::string checkpoint, out, json;
    ReleaseEvalOptions options;
  };
  auto a = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand("eval", "Evaluate a checkpoint on the temporal hold-out (documents after --cutoff).");
  c.app->add_option("CKPT", a->checkpoint, "A step_<N> checkpoint folder (or a folder whose `latest` names one)")->required();
  c.app->add_option("--data", a->options.holdout.data_path, "Dataset file (data-prep)")->required();
  c.app->add_option("--cutoff", a->options.holdout.cutoff, "RFC 3339: the hold-out is the documents after it")->required();
  c.app->add_option("--max-samples", a->options.holdout.max_samples, "Hold-out sequences scored (0: all)")
      ->capture_default_str();
  add_eval_options(c.app, a->options);
  c.app->add_option("--out", a->out, "Write evaluation.json, evaluation.md and reliability.svg here");
  c.app->add_option("--json", a->json, "Also write the evaluation JSON to FILE ('-': standard output)");
  c.run = [a] {
    if (!a->out.empty()) {
      require_gnuplot();
      std::filesystem::create_directories(a->out);
    }
    const CheckpointEvaluation e = evaluate_checkpoint(a->checkpoint, a->options);
    const HoldoutSummary& s = e.scores;
    std::cerr << "release-gate eval: loss " << s.loss << " nats/token (perplexity " << s.perplexity << "), ECE "
              << s.calibration.ece << ", top-1 " << s.calibration.top1_accuracy << ", worst slice " << s.worst_slice
              << "; " << s.tokens << " tokens in " << e.seconds << " s (" << e.evaluated_tokens_per_s
              << " evaluated tokens/s)" << std::endl;
    const nlohmann::json file = e.to_json();  // evaluation.json: the file edge
    if (!a->out.empty()) {
      const std::string svg = write_reliability_plot(e, a->out);
      write_json_file(a->out + "/evaluation.json", file);
      write_file_atomically(a->out + "/evaluation.md", evaluation_markdown(e, svg));
      std::cerr << "release-gate eval: " << a->out << "/evaluation.md" << std::endl;
    }
    print_json(a->json, file);
    return 0;
  };
  return c;
}

Subcommand add_baseline_command(CLI::App& parent) {
  auto a = std::make_shared<BaselineOptions>();
  a->plan.seq_len = 256;
  Subcommand c;
  c.app = parent.add_subcommand("baseline", "Fit, evaluate and register a named n-gram baseline of the training selection.");
  c.app->add_option("NAME", a->name, "Baseline name (letters, digits, . _ -)")->required();
  c.app->add_option("--registry", a->registry, "Release registry folder")->required();
  c.app->add_option("--data", a->plan.data_path, "Dataset file (data-prep)")->required();
  c.app->add_option("--cutoff", a->plan.cutoff, "RFC 3339: fit on documents available by it, evaluate after it")->required();
  c.app->add_option("--order", a->order, "1 (unigram) or 2 (bigram)")->capture_default_str();
  c.app->add_option("--seq-len", a->plan.seq_len, "Hold-out sequence length: the candidates' seq_len")->capture_default_str();
  c.app->add_option("--max-samples", a->plan.max_samples, "Hold-out sequences scored (0: all)")->capture_default_str();
  add_bootstrap_options(c.app, a->plan.bootstrap);
  c.run = [a] {
    const BaselineRecord b = register_baseline(*a);
    std::cout << "release-gate baseline: " << a->name << " (order-" << a->order << " n-gram) registered in " << a->registry
              << ": hold-out loss " << b.evaluation.scores.loss << " nats/token, ECE "
              << b.evaluation.scores.calibration.ece << std::endl;
    return 0;
  };
  return c;
}

Subcommand add_decide_command(CLI::App& parent) {
  struct Args {
    DecideOptions options;
    std::vector<std::string> evidence;
    int max_samples = -1;
    std::string json;
  };
  auto a = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand("decide", "Evaluate a candidate, compare it with a baseline under a policy, score the "
                                          "rubric, record the decision. Exit 0 promote, 1 reject, 2 unusable input.");
  DecideOptions& o = a->options;
  c.app->add_option("CKPT", o.checkpoint, "Candidate: a step_<N> checkpoint folder (or a folder whose `latest` names one)")
      ->required();
  c.app->add_option("--policy", o.policy_path, "Release policy JSON (scripts/release-policy.json)")->required();
  c.app->add_option("--baseline", o.baseline, "A registered baseline's name, or last-known-good")->capture_default_str();
  c.app->add_option("--registry", o.registry, "Release registry folder")->required();
  c.app->add_option("--data", o.eval.holdout.data_path, "Dataset file (default: the baseline's)");
  c.app->add_option("--cutoff", o.eval.holdout.cutoff, "RFC 3339 hold-out cutoff (default: the baseline's)");
  c.app->add_option("--max-samples", a->max_samples, "Hold-out sequences scored (default: the baseline's)");
  add_eval_options(c.app, o.eval);
  c.app->add_option("--run-dir", o.run_dir, "The training run's folder, where evidence is looked for (default: <CKPT>/../..)");
  c.app->add_option("--evidence", a->evidence, "ITEM=PATH: an evidence file instead of the default (repeatable)");
  c.app->add_option("--costs", o.costs_path,
                    "The run's cost table, copied into the record (default: <run dir>/costs.json when it exists)");
  c.app->add_flag("--dry-run", o.dry_run, "Decide and print, but write no record and move no pointer");
  c.app->add_option("--json", a->json, "Also write the record to FILE ('-': standard output)");
  c.run = [a] {
    for (const auto& e : a->evidence) {
      const auto eq = e.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError("--evidence '" + e + "': expected ITEM=PATH");
      a->options.evidence[e.substr(0, eq)] = e.substr(eq + 1);
    }
    if (a->max_samples >= 0) a->options.max_samples = a->max_samples;
    const Decision d = decide_release(a->options);
    std::cout << decision_text(d.record) << std::flush;
    print_json(a->json, d.record.to_json());
    return d.promote ? 0 : 1;
  };
  return c;
}

Subcommand add_history_command(CLI::App& parent) {
  struct Args {
    std::string registry, at;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand("history", "List the registry's release records, rollbacks, baselines and last-known-good; "
                                           "with --at T, what was in service at T and why.");
  c.app->add_option("--registry", a->registry, "Release registry folder")->required();
  c.app->add_option("--at", a->at, "RFC 3339: name what was in service at that time (a release, or a baseline a "
                                   "rollback put back) and the record that put it there");
  c.app->add_flag("--json", a->json, "Print the release and rollback records as a JSON array, oldest first, each with "
                                     "its \"format\" (with --at: the one event, or null)");
  c.run = [a] {
    const ReleaseRegistry r(a->registry, true);
    const auto records = r.history();
    const auto rollbacks = r.rollbacks();
    if (!a->at.empty()) {
      const auto event = in_service_at(service_timeline(records, rollbacks), rfc3339_micros(a->at, "--at"));
      if (a->json) std::cout << (event ? event->to_json() : nlohmann::json(nullptr)).dump(2) << std::endl;
      else std::cout << in_service_at_text(a->at, event);
      return 0;
    }
    const auto entries = registry_history(records, rollbacks);
    if (a->json) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& e : entries) list.push_back(e.to_json());
      std::cout << list.dump(2) << std::endl;
      return 0;
    }
    std::cout << history_text(entries, r.in_service(), r.baseline_names());
    return 0;
  };
  return c;
}

Subcommand add_monitor_command(CLI::App& parent) {
  struct Args {
    MonitorOptions options;
    int max_samples = -1;
    std::string json;
  };
  auto a = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand("monitor", "Score the release in service on the documents matured since its release, "
                                           "beside its release-time estimates; roll it back when the policy says so. "
                                           "Exit 0 keep, 1 rolled back (or must go), 2 cannot score.");
  MonitorOptions& o = a->options;
  c.app->add_option("--registry", o.registry, "Release registry folder")->required();
  c.app->add_option("--policy", o.policy_path, "Release policy JSON with \"rollback\" rules (scripts/release-policy.json)")
      ->required();
  c.app->add_option("--data", o.data_path, "The new snapshot (a data-prep dataset)")->required();
  c.app->add_option("--since", o.since, "RFC 3339: score the documents that happened after it (default: the release's "
                                        "hold-out cutoff; a cycle gives the previous snapshot's time)");
  c.app->add_option("--data-prep", o.data_prep_summary, "The new snapshot's data-prep summary (rejected records)");
  c.app->add_option("--run-dir", o.run_dir, "Recorded with the monitoring record (the cycle's folder)");
  c.app->add_option("--rollback-to", o.rollback_to, "Where a failing release goes instead of the previous known-good: "
                                                    "a promoted release record (records/<...>.json), or baseline:NAME "
                                                    "(a registered baseline). Default: the previous known-good, else "
                                                    "the policy's rollback.fallback_baseline");
  c.app->add_option("--max-samples", a->max_samples, "Matured sequences scored (default: the release's hold-out's)");
  add_eval_options(c.app, o.eval);
  c.app->add_option("--json", a->json, "Also write the monitoring record to FILE ('-': standard output)");
  c.run = [a] {
    if (a->max_samples >= 0) a->options.max_samples = a->max_samples;
    const MonitorResult result = monitor_release(a->options);
    std::cout << monitoring_text(result) << std::flush;
    print_json(a->json, result.record.to_json());
    return result.record.verdict == kVerdictKeep ? 0 : 1;
  };
  return c;
}

Subcommand add_review_command(CLI::App& parent) {
  struct Args {
    std::string registry;
    ReviewSignOff review;
  };
  auto a = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand("review", "Sign off a decision that needed a person (a promotion's or a rollback's record "
                                          "whose review is required): it is then no longer pending.");
  c.app->add_option("RECORD", a->review.record, "records/<...>.json or rollbacks/<...>.json, relative to the registry")
      ->required();
  c.app->add_option("--registry", a->registry, "Release registry folder")->required();
  c.app->add_option("--by", a->review.by, "Who reviewed it")->required();
  c.app->add_option("--note", a->review.note, "What they said");
  c.run = [a] {
    const ReleaseRegistry r(a->registry, true);
    a->review.signed_off = now_rfc3339();
    const std::string path = r.sign_off(a->review);
    std::cout << "release-gate review: " << a->review.record << " signed off by " << a->review.by << " (" << path << ")"
              << std::endl;
    return 0;
  };
  return c;
}

Subcommand add_costs_command(CLI::App& parent) {
  struct Args {
    std::vector<std::string> runs;
    std::string registry, total;
  };
  auto a = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand("costs", "Measure a pipeline run's cost table: RUN_DIR/costs.json (bytes stored, "
                                         "preprocessing, compute and queue wait per stage from Slurm or the local "
                                         "stage records, human review with --registry), printed as a table; with "
                                         "several runs, each one's and, with --total, the pattern's.");
  c.app->add_option("RUN_DIR", a->runs, "Pipeline run folders (run/<name>, or the cycles' cycle-<k>)")->required();
  c.app->add_option("--registry", a->registry, "Release registry: count the human review of the runs' decisions");
  c.app->add_option("--total", a->total, "Write the whole pattern's table (the runs added up) to FILE");
  c.run = [a] {
    CostOptions options;
    if (const char* job = std::getenv("SLURM_JOB_ID")) options.own_job_id = job;  // this job still runs
    options.registry = a->registry;
    std::vector<nlohmann::json> tables;
    for (const auto& run : a->runs) {
      tables.push_back(measure_costs(run, options));
      write_json_file(run + "/costs.json", tables.back());
      std::cout << costs_text(tables.back());
    }
    if (!a->total.empty()) {
      const nlohmann::json total = total_costs(tables);
      write_json_file(a->total, total);
      std::cout << costs_text(total);
    }
    return 0;
  };
  return c;
}

}  // namespace shardtrain::release_gate
