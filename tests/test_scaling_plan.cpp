// scale-bench plan (scaling/plan.hpp): memory per layout, ranking by throughput, exposed
// communication, the named shapes.
#include <catch2/catch.hpp>

#include <algorithm>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/model/parameters.hpp"
#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/scaling/fit.hpp"
#include "shardtrain/scaling/option_text.hpp"
#include "shardtrain/scaling/plan.hpp"
#include "shardtrain/scaling/prediction.hpp"
#include "shardtrain/scaling/seed_lab.hpp"
#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/stepmodel/sweep.hpp"
#include "shardtrain/stepmodel/two_level.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "shardtrain/comm/hierarchical.hpp"
#include "shardtrain/tool/scale_bench.hpp"
#include "shardtrain/tool/train_cli.hpp"
#include "shardtrain/tool/tool.hpp"
#include "scaling_test_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

using namespace shardtrain;
using namespace shardtrain::scaling;
using namespace scaling_test;

namespace {

// 1.3B parameters at GPT-2's vocabulary and context on 8 ranks, micro-batch 1, a 10 GB/s link
// without latency (the layouts differ by their traffic alone), and room for everything.
PlanOptions eight_ranks() {
  StepModel link;
  link.busbw_Bps = 10e9;
  link.alpha_s = 0;
  PlanOptions o;
  o.params = 1.3e9;
  o.ranks = 8;
  o.micro_batch = 1;
  o.seq_len = 1024;
  o.vocab = 50257;
  o.model = link;
  o.memory_per_rank = 1e15;
  return o;
}

ModelConfig shape_of(const PlanOptions& o) { return model_for_parameter_count(o.params, o.vocab, o.seq_len); }

const PlanRow& row(const Plan& p, const std::string& name) {
  for (const auto& r : p.rows)
    if (r.layout == name) return r;
  throw std::runtime_error("no row " + name);
}

// The best row without TP.
const PlanRow& first_tp1(const Plan& p) {
  for (const auto& r : p.rows)
    if (r.tp == 1) return r;
  throw std::runtime_error("no TP-1 row");
}

}  // namespace

TEST_CASE("plan: memory by memory.hpp, ranking by throughput, exclusions with reasons", "[scaling-model]") {
  const PlanOptions o = eight_ranks();
  const ModelConfig cfg = shape_of(o);
  CHECK(std::fabs(double(cfg.parameter_count()) / o.params - 1) < 0.05);
  const Plan all = plan_layouts(o);
  // Every TP degree the trainers accept on 8 ranks (dividing 8, n_head and 4 x d_model), counted
  // here from the shape itself, times the four stages.
  std::vector<int> degrees;
  for (int t = 1; t <= 8; ++t)
    if (8 % t == 0 && cfg.n_head % t == 0 && (4 * cfg.d_model) % t == 0) degrees.push_back(t);
  REQUIRE(degrees.size() >= 2);
  CHECK(all.tp_degrees == degrees);
  REQUIRE(all.rows.size() == 4 * degrees.size());
  for (const auto& r : all.rows) {
    INFO(r.layout);
    CHECK(r.dp * r.tp == 8);
    CHECK(r.grad_accum == 8 / r.dp);  // global batch = micro 1 x 8 ranks, spread over the DP ranks
    const MemoryEstimate e = estimate_memory(cfg, r.zero_stage, 8, 1, r.grad_accum, false, r.tp, DeviceKind::kCpu);
    CHECK(r.memory.total() == e.total());
    CHECK(r.fits);
    CHECK((r.tp == 1) == r.tp_collectives.empty());
    CHECK(r.predicted.comm_s == Approx(r.dp_comm_s + r.tp_comm_s));
  }
  const double P = double(cfg.parameter_count());
  CHECK(row(all, "DDP").memory.model_state == 16 * P);  // the formula of PERFORMANCE.md
  for (std::size_t i = 1; i < all.rows.size(); ++i)
    CHECK(all.rows[i - 1].predicted.tokens_per_s >= all.rows[i].predicted.tokens_per_s);
  CHECK(row(all, "ZeRO-3").predicted.tokens_per_s < row(all, "ZeRO-2").predicted.tokens_per_s);  // more traffic
  // ZeRO-3 moves DDP's bytes and gathers the blocks once more for backward: (W-1)/W of their 4
  // bytes per parameter (the embeddings and ln_f stay gathered from forward to backward).
  const ParameterRegistry registry(cfg);
  double blocks = 0;
  for (const auto& u : registry.units())
    if (u.name.rfind("h.", 0) == 0) blocks += double(u.size());
  CHECK(row(all, "ZeRO-3").predicted.comm_s ==
        Approx(row(all, "DDP").predicted.comm_s + 7.0 / 8 * 4 * blocks / 10e9).epsilon(1e-4));
  CHECK(row(all, "ZeRO-1").predicted.comm_s == Approx(row(all, "DDP").predicted.comm_s));
  CHECK(all.text().find("not built yet") == std::string::npos);
  CHECK(all.text().find("tensor parallelism: TP degrees 1, 2") != std::string::npos);
  CHECK(all.to_json()["tensor_parallelism"]["degrees"] == degrees);
}

TEST_CASE("plan: with latency the layout with fewer calls wins, worked by hand", "[scaling-model]") {
  // DDP's 4 MiB buckets (ceil(4P / 4 MiB) all-reduces, 2(W-1) ring steps each) against ZeRO-1's
  // L + 2 reduce-scatters and all-gathers (W-1 steps each).
  PlanOptions o = eight_ranks();
  const ModelConfig cfg = shape_of(o);
  const Plan all = plan_layouts(o);
  o.model.alpha_s = 20e-6;
  const Plan lat = plan_layouts(o);
  const double P = double(cfg.parameter_count());
  // DDP's buckets: the embeddings' gradient (pinned, reduced after backward) apart from the rest.
  const double E = double(ParameterRegistry(cfg).units().front().size());
  const double buckets = std::ceil(4 * (P - E) / (4.0 * 1024 * 1024)) + std::ceil(4 * E / (4.0 * 1024 * 1024));
  CHECK(row(lat, "DDP").predicted.comm_s - row(all, "DDP").predicted.comm_s == Approx(buckets * 14 * 20e-6));
  CHECK(row(lat, "ZeRO-1").predicted.comm_s - row(all, "ZeRO-1").predicted.comm_s ==
        Approx(2 * (cfg.n_layer + 2) * 7 * 20e-6));
  CHECK(first_tp1(lat).layout == "ZeRO-1");
}

TEST_CASE("plan: TP 2's two axes worked by hand, its sums exposed whatever the overlap, none on cuda",
          "[scaling-model]") {
  // The ring formula with alpha 0: the DP axis (4 ranks) all-reduces one TP rank's share of the
  // gradients, 2(4-1)/4 x 4 P_local / busbw; the TP axis (2 ranks) per micro-batch (one here) 4L+2
  // all-reduces of 4NC bytes and one of 8N (2(2-1)/2 x bytes / busbw each) and an all-gather of
  // 4N x 2 bytes ((2-1)/2 x bytes / busbw).
  PlanOptions o = eight_ranks();
  const ModelConfig cfg = shape_of(o);
  const PlanRow ddp_tp2 = row(plan_layouts(o), "DDP x TP2");
  const double P = double(cfg.parameter_count());
  const double P_local = double(ParameterRegistry(cfg, {2, 0}).total());
  CHECK(P_local < 0.6 * P);  // the split matrices and wte halve; LayerNorms, wpe and biases do not
  CHECK(ddp_tp2.dp == 4);
  CHECK(ddp_tp2.dp_comm_s == Approx(1.5 * 4 * P_local / 10e9));
  const double N = 1.0 * 1024, C = cfg.d_model;
  REQUIRE(ddp_tp2.grad_accum == 2);  // global batch 8 over DP 4, micro-batch 1
  const double tp_s = 2 * ((4.0 * cfg.n_layer + 2) * 4 * N * C + 8 * N + 0.5 * 4 * N * 2) / 10e9;
  CHECK(ddp_tp2.tp_comm_s == Approx(tp_s));
  CHECK(ddp_tp2.memory.model_state == Approx(16 * P_local));
  // The TP sums are on the critical path: exposed whatever the overlap; of the DP share only the
  // pinned embeddings' reduction (after backward) is, the rest hides behind backward.
  o.model.overlap = 1;
  const Plan hidden = plan_layouts(o);
  const double E = double(ParameterRegistry(cfg).units().front().size());
  const double E_tp2 = double(ParameterRegistry(cfg, {2, 0}).units().front().size());
  CHECK(row(hidden, "DDP x TP2").predicted.exposed_comm_s == Approx(ddp_tp2.tp_comm_s + 1.5 * 4 * E_tp2 / 10e9));
  CHECK(row(hidden, "DDP").predicted.exposed_comm_s == Approx(2.0 * 7 / 8 * 4 * E / 10e9));
  // --device cuda: the trainers refuse --tp > 1 there, so the plan holds TP 1 only and says why.
  o.model.overlap = 0;
  o.device = DeviceKind::kCuda;
  const Plan cuda = plan_layouts(o);
  CHECK(cuda.tp_degrees == std::vector<int>{1});
  CHECK(cuda.rows.size() == 4);
  CHECK(cuda.text().find("only TP 1 on --device cuda") != std::string::npos);
}

TEST_CASE("plan: a memory budget excludes the layouts that need more, each saying why", "[scaling-model]") {
  PlanOptions o = eight_ranks();
  const Plan all = plan_layouts(o);
  // A budget below every TP-1 layout's need but above the least a TP layout needs: only TP
  // layouts fit, every TP-1 one is excluded saying why.
  double least_tp1 = 1e300, least_tp = 1e300;
  for (const auto& r : all.rows) {
    double& least = r.tp == 1 ? least_tp1 : least_tp;
    least = std::min(least, r.resident);  // the budget holds the process's resident (estimate + overhead)
  }
  REQUIRE(least_tp < least_tp1);
  o.memory_per_rank = (least_tp + least_tp1) / 2;
  const Plan only_tp = plan_layouts(o);
  CHECK(only_tp.rows.front().fits);
  CHECK(only_tp.rows.front().tp > 1);
  for (const auto& r : only_tp.rows)
    if (r.tp == 1) CHECK_FALSE(r.fits);

  // A budget between ZeRO-3's need and ZeRO-2's at TP 1: of the TP-1 layouts only ZeRO-3 fits,
  // the others say why.
  const double z3 = row(all, "ZeRO-3").resident, z2 = row(all, "ZeRO-2").resident;
  REQUIRE(z3 < z2);
  o.memory_per_rank = (z3 + z2) / 2;
  const Plan tight = plan_layouts(o);
  CHECK(first_tp1(tight).layout == "ZeRO-3");
  CHECK(first_tp1(tight).fits);
  for (const auto& r : tight.rows) {
    if (r.tp > 1 || r.layout == "ZeRO-3") continue;
    CHECK_FALSE(r.fits);
    char expect[128];
    std::snprintf(expect, sizeof(expect), "needs %.2f GB per rank (the process's resident), budget %.2f GB", r.resident / 1e9,
                  o.memory_per_rank / 1e9);
    CHECK(r.reason == expect);
  }
  for (std::size_t i = 1; i < tight.rows.size(); ++i)  // the fitting ones first
    CHECK((tight.rows[i - 1].fits || !tight.rows[i].fits));
  const nlohmann::json j = tight.to_json();
  CHECK(j["layouts"].size() == tight.rows.size());
  CHECK(j["layouts"][0]["fits"] == true);
  CHECK(j["layouts"][0]["dp"].get<int>() * j["layouts"][0]["tp"].get<int>() == 8);
}

TEST_CASE("plan: on a slow link what outlasts its pass is exposed, worked by hand", "[scaling-model]") {
  // GPT-2 small on 2 ranks, global batch 2 (one micro-batch each), 21 s of compute per step (this
  // machine's one-rank step), forward 0.35 and backward 0.62 of it, overlap 0.9, no latency. E:
  // the embeddings unit's parameters, R the rest; h the LM head's share of each pass, 2 V C of the
  // forward's FLOPs per token. At W = 2 an all-reduce moves 4 x its bytes / busbw, a reduce-scatter
  // or all-gather half that. DDP: the rest's buckets stream behind backward, the embeddings'
  // (completed last) after it. ZeRO-1/2: reduce-scatters behind backward and the parameter
  // gathers behind the next forward, the embeddings' pinned in both. ZeRO-3: a gather of
  // everything for forward, of the blocks again for backward, a reduce-scatter of everything.
  PlanOptions o;
  o.shape = model_preset("gpt2-small");
  o.shape_name = "gpt2-small";
  o.ranks = 2;
  o.memory_per_rank = 1e15;
  o.model.compute_s = 21;
  o.model.forward_share = 0.35;
  o.model.backward_share = 0.62;
  o.model.overlap = 0.9;
  const ParameterRegistry registry(*o.shape);
  const double P = double(registry.total()), E = double(registry.units().front().size());
  double blocks = 0;
  for (const auto& u : registry.units())
    if (u.name.rfind("h.", 0) == 0) blocks += double(u.size());
  const double R = P - E;
  const double h = 2.0 * 50257 * 768 / (o.shape->flops_per_token() / 3);
  CHECK(h == Approx(0.269).epsilon(0.01));
  const double fwd = 0.35 * (1 - h) * 21, bwd = 0.62 * (1 - h) * 21;
  const auto exposed_of = [](const Plan& p, const std::string& name) {
    for (const auto& r : p.rows)
      if (r.layout == name) return r.predicted.exposed_comm_s;
    throw std::runtime_error("no row " + name);
  };
  const auto plan_at = [&](double busbw) {
    o.model.busbw_Bps = busbw;
    const Plan plan = plan_layouts(o);
    const double e = 2 * E / busbw, r = 2 * R / busbw, b = 2 * blocks / busbw;  // one gather or scatter
    const double ddp = std::max(0.1 * 2 * (e + r), 2 * e + std::max(0.0, 2 * r - bwd));
    const double zero2 = std::max(0.1 * 2 * (e + r), 2 * e + std::max(0.0, r - fwd) + std::max(0.0, r - bwd));
    const double zero3 = std::max(0.1 * (2 * e + 2 * r + b), 2 * e + std::max(0.0, r - fwd) + std::max(0.0, r + b - bwd));
    CHECK(exposed_of(plan, "DDP") == Approx(ddp).epsilon(1e-6));
    CHECK(exposed_of(plan, "ZeRO-1") == Approx(zero2).epsilon(1e-6));
    CHECK(exposed_of(plan, "ZeRO-2") == Approx(zero2).epsilon(1e-6));
    CHECK(exposed_of(plan, "ZeRO-3") == Approx(zero3).epsilon(1e-6));
    return plan;
  };
  // 12.5 MB/s (a 200 Mbit/s link carrying both ways at once): every pass is outlasted.
  const Plan slow = plan_at(12.5e6);
  CHECK(exposed_of(slow, "ZeRO-2") < exposed_of(slow, "DDP"));
  CHECK(exposed_of(slow, "DDP") < exposed_of(slow, "ZeRO-3"));
  // 1 GB/s: only the pinned embeddings show (more than the overlap's floor), twice over ZeRO's
  // passes (its gather and its reduce-scatter) against DDP's one all-reduce of the same bytes.
  const Plan fast = plan_at(1e9);
  CHECK(exposed_of(fast, "DDP") == Approx(4 * E / 1e9).epsilon(1e-6));
  CHECK(exposed_of(fast, "ZeRO-3") == Approx(exposed_of(fast, "ZeRO-2")).epsilon(1e-9));
}

TEST_CASE("plan --model NAME: the named shape exactly, --vocab and --seq-len beside it override it", "[scaling-model]") {
  const auto plan = [](std::vector<std::string> args) {
    args.insert(args.begin(), "plan");
    for (const char* a : {"--ranks", "2", "--memory-per-rank", "80GB", "--busbw-GBps", "10", "--alpha-us", "5"}) args.push_back(a);
    return scale_bench_process(args);
  };
  test::ToolRun r = plan({"--model", "gpt2-small", "--json"});
  REQUIRE(r.status == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["model_name"] == "gpt2-small");
  CHECK(j["model"] == nlohmann::json{{"vocab", 50257}, {"seq_len", 1024}, {"d_model", 768}, {"n_layer", 12}, {"n_head", 12}});
  CHECK(j["model_parameters"].get<double>() == kGpt2SmallParams);
  CHECK(j["params"].get<double>() == kGpt2SmallParams);
  // The parameter registry (the trainers' tensors) of the shape planned counts the same.
  CHECK(double(ParameterRegistry(ModelConfig::from_json(j["model"])).total()) == kGpt2SmallParams);
  // Each of the 2 ranks computes its sequence of 1,024 tokens at the default 100 GFLOP/s.
  CHECK(j["compute_s"].get<double>() == Approx(kGpt2SmallFlopsPerToken * 1024 / 100e9).epsilon(1e-12));
  // --params could only approximate it: the shape it assumes for the same count is another one.
  CHECK(model_for_parameter_count(kGpt2SmallParams, 50257, 1024) != ModelConfig::from_json(j["model"]));
  // The table says which shape it planned.
  r = plan({"--model", "gpt2-small"});
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("plan: gpt2-small (n_layer 12, d_model 768, n_head 12, vocab 50257, seq_len 1024: "
                                    "124439808 parameters)"));
  // GPT-2 XL: 48 layers of 1600, 25 heads: 1,557,611,200 parameters (the published 1.5B).
  r = plan({"--model", "gpt2-xl", "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["model_parameters"].get<double>() == 1557611200.0);
  // --vocab and --seq-len given beside --model override its fields, as on the trainers.
  r = plan({"--seq-len", "256", "--model", "gpt2-small", "--vocab", "50304", "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["model"] ==
        nlohmann::json{{"vocab", 50304}, {"seq_len", 256}, {"d_model", 768}, {"n_layer", 12}, {"n_head", 12}});
  // Exactly one of --model and --params; an unknown name lists the names.
  r = plan({"--model", "gpt2-small", "--params", "1e9"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--model NAME or --params N, not both"));
  r = plan({});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("plan needs the model: --model NAME") && Catch::Contains("or --params N"));
  r = plan({"--model", "gpt3"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--model: 'gpt3' is not a known model") &&
                        Catch::Contains("gpt2-small, gpt2-medium, gpt2-large, gpt2-xl") && Catch::Contains("--params N"));
  CHECK(lines_of(r.err) == 1);
  // --params alone as before.
  CHECK(plan({"--params", "1e9"}).status == 0);
}

TEST_CASE("plan: the assumed shape has a head count tensor parallelism can split", "[scaling-model]") {
  // The nearest width alone gave prime head counts (33 at 1.3e9, 37 at 2.7e9): no TP above 1.
  // Over a sweep of GPT-2-vocabulary sizes from 1e8 parameters (where several widths fall within
  // 5%), every shape stays within 5% of the asked count and its head count divides by 4.
  for (double params = 1e8; params <= 2e11; params *= 1.7) {
    const ModelConfig c = model_for_parameter_count(params, 50257, 1024);
    INFO("params " << params << ": n_layer " << c.n_layer << ", d_model " << c.d_model << ", n_head " << c.n_head);
    CHECK(std::fabs(double(c.parameter_count()) / params - 1) < 0.05);
    CHECK(c.n_head % 4 == 0);
  }
}
