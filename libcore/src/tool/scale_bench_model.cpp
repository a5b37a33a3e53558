// scale-bench fit, predict, plan (scale_bench.hpp): options + one call into the step model
// (stepmodel/) and its fit, planner and tables (scaling/). None needs MPI.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/number_text.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/scaling/fit.hpp"
#include "shardtrain/scaling/option_text.hpp"
#include "shardtrain/scaling/plan.hpp"
#include "shardtrain/scaling/prediction.hpp"
#include "shardtrain/scaling/seed_lab.hpp"
#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/tool/scale_bench.hpp"
#include "choice_option.hpp"
#include "model_option.hpp"

namespace shardtrain::scale_bench {
namespace {

// The per-rank FLOP rate that turns a shape's FLOPs into compute time when --compute-ms is not
// given (plan and predict --model), GFLOP/s.
constexpr double kDefaultPeakGflops = 100;

// The model parameters any of predict and plan may take on the command line; each one given
// overrides the step model file's. predict also takes a named shape (--model NAME) whose workload
// fills what the command line did not give.
struct ModelOverrides {
  std::string step_model_path, example, shape_name;
  double busbw_GBps = 0, alpha_us = 0, compute_ms = 0, overlap = 0, straggler = 0, tokens_per_step = 0;
  double grad_bytes = 0, buckets = 1;
  double intra_busbw_GBps = 0, intra_alpha_us = 0, inter_busbw_GBps = 0, inter_alpha_us = 0;
  int micro_batch = 1;
  double peak_gflops = kDefaultPeakGflops;
  std::string scaling;
  CLI::App* app = nullptr;
  bool workload = false;  // predict's options (--example, --model, --tokens-per-step, ...), not plan's

  void add(CLI::App* a, bool with_workload) {
    app = a;
    workload = with_workload;
    a->add_option("--step-model", step_model_path, "Step model file written by 'scale-bench fit'");
    a->add_option("--busbw-GBps", busbw_GBps, "Bus bandwidth (nccl-tests definition), GB/s (10^9 bytes/s)");
    a->add_option("--alpha-us", alpha_us, "Latency of one ring step, microseconds");
    a->add_option("--compute-ms", compute_ms,
                  with_workload ? "Compute of one step on one rank at W=1, milliseconds (with --model: default from its "
                                  "FLOPs and --peak-gflops)"
                                : "Compute of one step on one rank at --ranks, milliseconds (default: from FLOPs and --peak-gflops)");
    a->add_option("--overlap", overlap, "Share of communication hidden behind backward, in [0, 1]");
    a->add_option("--straggler", straggler, "Straggler coefficient s: the step waits compute x s x log2 W more");
    a->add_option("--intra-busbw-GBps", intra_busbw_GBps, "Link inside a node: bus bandwidth, GB/s (two-level model)");
    a->add_option("--intra-alpha-us", intra_alpha_us, "Link inside a node: latency of one ring step, microseconds");
    a->add_option("--inter-busbw-GBps", inter_busbw_GBps, "Link between nodes: bus bandwidth, GB/s (two-level model)");
    a->add_option("--inter-alpha-us", inter_alpha_us, "Link between nodes: latency of one ring step, microseconds");
    if (!with_workload) return;
    a->add_option("--example", example, "Start from a built-in model instead of --step-model: seed-lab")
        ->check(CLI::IsMember({"seed-lab"}));
    a->add_option("--model", shape_name,
                  "A named shape: " + model_preset_names() + " (GPT-2's sizes, as the trainers' --model); the workload "
                  "of one DDP step of it wherever not given: --grad-bytes 4 x parameters (float32 gradients, one "
                  "all-reduce in --buckets calls), --tokens-per-step seq_len x --micro-batch, --compute-ms its FLOPs "
                  "(6N + 12 L T C per token) at --peak-gflops");
    a->add_option("--micro-batch", micro_batch, "With --model: sequences per step on one rank at W=1")->capture_default_str();
    a->add_option("--peak-gflops", peak_gflops, "With --model and no --compute-ms: the per-rank FLOP rate, GFLOP/s")
        ->capture_default_str();
    a->add_option("--scaling", scaling, "weak (each rank keeps its batch) or strong (the batch is divided)")
        ->check(CLI::IsMember({"weak", "strong"}));
    a->add_option("--tokens-per-step", tokens_per_step, "Tokens of one step at W=1");
    a->add_option("--grad-bytes", grad_bytes, "Replace the model's collectives by one all-reduce of this many bytes per step ...");
    a->add_option("--buckets", buckets, "... issued as this many equal all-reduce calls (default 1)");
  }

  bool given(const char* option) const { return option_given(*app, option); }

  scaling::StepModel build() const {
    scaling::StepModel m;
    if (!step_model_path.empty() && !example.empty()) throw UsageError("give --step-model or --example, not both");
    if (!example.empty()) m = scaling::seed_lab_model();
    if (!step_model_path.empty()) {
      m = scaling::read_step_model(step_model_path, "the --step-model step model");
    }
    // Refused here, naming the option: the model's own check would name its field instead.
    if (given("--overlap") && !(overlap >= 0 && overlap <= 1))
      throw UsageError("--overlap " + number_text("%g", overlap) + " is not in [0, 1] (the share of communication hidden)");
    if (given("--tokens-per-step") && !(tokens_per_step > 0))
      throw UsageError("--tokens-per-step must be > 0 (tokens of one step at W=1)");
    nlohmann::json options = nlohmann::json::object();
    auto set = [&](const char* flag, double value, double scale, double& field) {
      if (given(flag)) field = value * scale, options[flag] = value;
    };
    set("--busbw-GBps", busbw_GBps, 1e9, m.busbw_Bps);
    set("--alpha-us", alpha_us, 1e-6, m.alpha_s);
    // A link given on the command line is every operation's: the file's per-operation fits give way.
    if (given("--busbw-GBps") || given("--alpha-us")) m.op_links.clear();
    set("--compute-ms", compute_ms, 1e-3, m.compute_s);
    set("--overlap", overlap, 1, m.overlap);
    set("--straggler", straggler, 1, m.straggler);
    set("--intra-busbw-GBps", intra_busbw_GBps, 1e9, m.intra.busbw_Bps);
    set("--intra-alpha-us", intra_alpha_us, 1e-6, m.intra.alpha_s);
    set("--inter-busbw-GBps", inter_busbw_GBps, 1e9, m.inter.busbw_Bps);
    set("--inter-alpha-us", inter_alpha_us, 1e-6, m.inter.alpha_s);
    set("--tokens-per-step", tokens_per_step, 1, m.tokens_per_step);
    if (given("--scaling")) {
      m.scaling = scaling == "weak" ? scaling::Scaling::kWeak : scaling::Scaling::kStrong;
      options["--scaling"] = scaling;
    }
    if (given("--grad-bytes") || given("--buckets")) {
      if (!given("--grad-bytes") && shape_name.empty()) throw UsageError("--buckets needs --grad-bytes (or --model NAME)");
      if (!(grad_bytes >= 0) || !(buckets >= 1)) throw UsageError("--grad-bytes must be >= 0 and --buckets >= 1");
      if (given("--grad-bytes")) {
        m.collectives = {{CollectiveOp::kAllReduce, grad_bytes / buckets, buckets}};
        options["--grad-bytes"] = grad_bytes;
      }
      options["--buckets"] = buckets;
    }
    if (!shape_name.empty()) apply_shape(m);
    else if (workload && (given("--micro-batch") || given("--peak-gflops")))
      throw UsageError("--micro-batch and --peak-gflops size the workload of a named shape: add --model NAME (" +
                       model_preset_names() + ")");
    if (!options.empty()) m.inputs["command_line"] = options;
    if (!step_model_path.empty()) m.inputs["model_file"] = step_model_path;
    return m;
  }

  // predict --model NAME: one DDP step of the shape on one rank at W=1, in every part of the
  // workload the command line did not give: the gradients' all-reduce (4 bytes per parameter, one
  // all-reduce per step as the trainers' DDP does, in --buckets equal calls), seq_len x micro-batch
  // tokens, and their FLOPs (ModelConfig::flops_per_token, the trainers' MFU numerator) at
  // --peak-gflops. What came from where goes into the model's inputs ("workload").
  void apply_shape(scaling::StepModel& m) const {
    const ModelConfig cfg = model_preset(shape_name, "--model", "or give the workload with --grad-bytes, --tokens-per-step and --compute-ms");
    if (micro_batch < 1) throw UsageError("--micro-batch must be >= 1, got " + std::to_string(micro_batch));
    if (!(peak_gflops > 0)) throw UsageError("--peak-gflops must be > 0");
    if (given("--peak-gflops") && given("--compute-ms"))
      throw UsageError("--peak-gflops prices --model's FLOPs when --compute-ms is not given: drop one of them");
    const double params = double(cfg.parameter_count());
    const double tokens = double(cfg.seq_len) * micro_batch;
    nlohmann::json w = {{"model", shape_name}, {"config", cfg.to_json()}, {"parameters", params}, {"micro_batch", micro_batch}};
    if (!given("--grad-bytes")) {
      m.collectives = {{CollectiveOp::kAllReduce, 4 * params / buckets, buckets}};
      w["grad_bytes"] = 4 * params;
      w["grad_bytes_from"] = "4 x parameters (float32 gradients), one all-reduce per step in --buckets calls";
    }
    if (!given("--tokens-per-step")) {
      m.tokens_per_step = tokens;
      w["tokens_per_step_from"] = "seq_len x --micro-batch";
    }
    if (!given("--compute-ms")) {
      m.compute_s = cfg.flops_per_token() * tokens / (peak_gflops * 1e9);
      w["flops_per_token"] = cfg.flops_per_token();
      w["peak_gflops"] = peak_gflops;
      w["compute_from"] = "flops_per_token (6N + 12 L T C) x seq_len x --micro-batch / --peak-gflops";
    }
    m.inputs["workload"] = w;
  }

  // One line of what --model set ("" without it), printed above predict's tables.
  std::string workload_line(const scaling::StepModel& m) const {
    if (shape_name.empty()) return "";
    const ModelConfig cfg = model_preset(shape_name);
    const double params = double(cfg.parameter_count());
    std::string s = "workload of one step at W=1, --model " + shape_name + " (n_layer " + std::to_string(cfg.n_layer) +
                    ", d_model " + std::to_string(cfg.d_model) + ", n_head " + std::to_string(cfg.n_head) + ", vocab " +
                    std::to_string(cfg.vocab) + ", seq_len " + std::to_string(cfg.seq_len) + ": " +
                    number_text("%.0f", params) + " parameters): ";
    s += given("--grad-bytes") ? "--grad-bytes as given"
                               : "gradients 4 x parameters = " + number_text("%.0f", 4 * params) + " bytes in " +
                                     number_text("%g", buckets) + (buckets == 1 ? " all-reduce" : " all-reduce calls");
    s += given("--tokens-per-step") ? "; --tokens-per-step as given"
                                    : "; " + number_text("%g", m.tokens_per_step) + " tokens (seq_len x micro-batch " +
                                          std::to_string(micro_batch) + ")";
    s += given("--compute-ms") ? "; --compute-ms as given"
                               : "; compute " + number_text("%.0f", cfg.flops_per_token()) +
                                     " FLOPs per token (6N + 12 L T C) at " + number_text("%g", peak_gflops) + " GFLOP/s";
    return s + "\n";
  }
};

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

}  // namespace

Subcommand add_fit_command(CLI::App& parent) {
  struct State {
    scaling::FitOptions o;
    std::string out;
  };
  auto st = std::make_shared<State>();
  Subcommand c;
  c.app = parent.add_subcommand("fit", "Fit the step model: busbw and alpha from a collectives sweep, compute time,\n"
                                       "straggler coefficient and overlap from run folders; write it as JSON.");
  c.app->add_option("--collectives", st->o.collectives_path, "Collectives sweep ('scale-bench collectives --json')")->required();
  c.app->add_option("--runs", st->o.run_dirs, "Run folders (or their summary.json) of ddp-train/fsdp-train runs");
  c.app->add_option("--impl", st->o.impl, "Sweep rows of this implementation (default: communicator-fast, or the only one)");
  c.app->add_option("--scaling", st->o.scaling, "weak, strong or auto (from the runs' tokens per step)")
      ->check(CLI::IsMember({"auto", "weak", "strong"}))
      ->capture_default_str();
  c.app->add_option("--overlap", st->o.overlap, "Fix the overlap in [0, 1] (default: measured from the runs)");
  c.app->add_option("-o,--output", st->out, "Model file to write ('-': standard output)")->required();
  CLI::App* app = c.app;
  c.run = [st, app]() -> int {
    if (app->count("--overlap") && !(st->o.overlap >= 0 && st->o.overlap <= 1))
      throw UsageError("--overlap " + std::to_string(st->o.overlap) + " is not in [0, 1]");
    const scaling::StepModel m = scaling::fit_model(st->o);
    if (st->out == "-") print_json(m.to_json());
    else {
      write_json_file(st->out, m.to_json());
      std::printf("fit: busbw %.3f GB/s, alpha %.2f us, compute %.3f ms, straggler %.4f, overlap %.2f (%s scaling) -> %s\n",
                  m.busbw_Bps / 1e9, m.alpha_s * 1e6, m.compute_s * 1e3, m.straggler, m.overlap,
                  scaling::scaling_name(m.scaling), st->out.c_str());
      if (m.intra.known() || m.inter.known())
        std::printf("fit: two levels: intra-node busbw %.3f GB/s, alpha %.2f us; inter-node busbw %.3f GB/s, alpha %.2f us\n",
                    m.intra.busbw_Bps / 1e9, m.intra.alpha_s * 1e6, m.inter.busbw_Bps / 1e9, m.inter.alpha_s * 1e6);
    }
    return 0;
  };
  return c;
}

Subcommand add_predict_command(CLI::App& parent) {
  struct State {
    ModelOverrides model;
    std::string workers = "1,2,4,8,16";
    std::string topologies, layouts = "flat,hierarchical,auto";
    bool json = false;
  };
  auto st = std::make_shared<State>();
  Subcommand c;
  c.app = parent.add_subcommand("predict", "The step model's deterministic simulation: step time, speedup and\n"
                                           "E(W) = throughput_W / (W x throughput_1) at each W, with the terms.");
  st->model.add(c.app, true);
  c.app->add_option("--workers", st->workers, "World sizes, comma separated")->capture_default_str();
  c.app->add_option("--topology", st->topologies,
                    "Instead of --workers: NODESxRANKS_PER_NODE topologies, comma separated (e.g. 2x2,3x1,3x2), each\n"
                    "priced on the two links (--intra-*/--inter-* or the model file's) per --layout");
  c.app->add_option("--layout", st->layouts, "With --topology: flat, hierarchical, auto (comma separated)")->capture_default_str();
  c.app->add_flag("--json", st->json, "Print JSON instead of the table");
  c.run = [st]() -> int {
    refuse_step_model_file(st->model.shape_name, "scale-bench predict");
    const scaling::StepModel m = st->model.build();
    if (!st->json) std::fputs(st->model.workload_line(m).c_str(), stdout);
    if (!st->topologies.empty()) {
      const auto topologies = scaling::parse_topologies(st->topologies);
      std::vector<scaling::CommLayout> layouts;
      std::stringstream in(st->layouts);
      for (std::string item; std::getline(in, item, ',');) layouts.push_back(scaling::parse_comm_layout(item));
      if (layouts.empty()) throw UsageError("--layout names no layout (flat, hierarchical, auto)");
      if (st->json) print_json(scaling::topology_prediction_json(m, topologies, layouts));
      else std::fputs(scaling::topology_prediction_table(m, topologies, layouts).c_str(), stdout);
      return 0;
    }
    const std::vector<int> workers = scaling::parse_workers(st->workers);
    if (st->json) print_json(scaling::prediction_json(m, workers));
    else std::fputs(scaling::prediction_table(m, workers).c_str(), stdout);
    return 0;
  };
  return c;
}

Subcommand add_plan_command(CLI::App& parent) {
  struct State {
    ModelOverrides model;
    scaling::PlanOptions o;
    std::string memory, shape_name;
    double peak_gflops = kDefaultPeakGflops;
    std::string layouts = "flat,hierarchical";
    bool json = false;
  };
  auto st = std::make_shared<State>();
  Subcommand c;
  c.app = parent.add_subcommand("plan", "Every DP x TP layout (each tensor-parallel degree the trainers accept, each\n"
                                        "ZeRO stage 0-3 over the DP axis) with its memory per rank by the trainers'\n"
                                        "formulas, whether it fits the budget and its predicted throughput (the TP\n"
                                        "collectives included), ranked.");
  c.app->add_option("--model", st->shape_name,
                    "The model, a named shape: " + model_preset_names() + " (GPT-2's sizes, as the trainers' --model), "
                    "planned exactly; --vocab and --seq-len given beside it override its fields");
  c.app->add_option("--params", st->o.params, "Instead of --model: parameters of a model of another size (a GPT-2 shape is assumed)");
  c.app->add_option("--ranks", st->o.ranks, "Ranks W = DP x TP (every TP degree dividing W is planned)")->required();
  c.app->add_option("--memory-per-rank", st->memory, "Memory budget per rank: bytes, or 8GB, 80GiB, ...")->required();
  c.app->add_option("--micro-batch", st->o.micro_batch, "Sequences per micro-batch")->capture_default_str();
  c.app->add_option("--seq-len", st->o.seq_len, "Context length (with --model: its own unless given)")->capture_default_str();
  add_choice_option<DeviceKind>(*c.app, "--device", st->o.device, choices_of<DeviceKind>(kDeviceKindNames),
                                "cpu or cuda: sizes the activations as that backend keeps them");
  c.app->add_option("--vocab", st->o.vocab, "Vocabulary size (with --model: its own unless given)")->capture_default_str();
  c.app->add_option("--global-batch", st->o.global_batch, "Sequences per optimizer step (default: micro-batch x ranks)");
  c.app->add_option("--peak-gflops", st->peak_gflops, "Per-rank FLOP rate for the compute time, GFLOP/s")->capture_default_str();
  c.app->add_flag("--deterministic", st->o.deterministic, "Plan for --deterministic reductions (exact-sum buffers)");
  c.app->add_option("--nodes", st->o.nodes, "Nodes the ranks run on (ranks / nodes each); > 1: every layout per --layout")
      ->capture_default_str();
  c.app->add_option("--layout", st->layouts, "With --nodes > 1: flat, hierarchical, auto (comma separated)")->capture_default_str();
  st->model.add(c.app, false);
  c.app->add_flag("--json", st->json, "Print JSON instead of the table");
  CLI::App* app = c.app;
  c.run = [st, app]() -> int {
    refuse_step_model_file(st->shape_name, "scale-bench plan");
    const bool named = app->count("--model") > 0, sized = app->count("--params") > 0;
    if (named && sized)
      throw UsageError("plan: give --model NAME or --params N, not both (--params sizes a model of no named shape)");
    if (!named && !sized)
      throw UsageError("plan needs the model: --model NAME (" + model_preset_names() + ") or --params N");
    if (named) {
      ModelConfig shape;
      shape.vocab = st->o.vocab;
      shape.seq_len = st->o.seq_len;
      apply_model_option(*app, st->shape_name, shape, "or give the size with --params N");
      st->o.shape = shape;
      st->o.shape_name = st->shape_name;
    }
    st->o.memory_per_rank = scaling::parse_bytes(st->memory, "--memory-per-rank");
    st->o.peak_flops = st->peak_gflops * 1e9;
    st->o.model = st->model.build();
    st->o.layouts.clear();
    std::stringstream in(st->layouts);
    for (std::string item; std::getline(in, item, ',');) st->o.layouts.push_back(scaling::parse_comm_layout(item));
    if (!st->model.app->count("--compute-ms")) st->o.model.compute_s = 0;  // a model file's compute is for its own workload
    if (!(st->o.model.busbw_Bps > 0))
      throw UsageError("plan needs the link: --step-model FILE, or --busbw-GBps and --alpha-us");
    const scaling::Plan plan = scaling::plan_layouts(st->o);
    if (st->json) print_json(plan.to_json());
    else std::fputs(plan.text().c_str(), stdout);
    return 0;
  };
  return c;
}

}  // namespace shardtrain::scale_bench
