#include "shardtrain/deviceproof/gpu_check_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "shardtrain/base/error.hpp"

namespace shardtrain::deviceproof {

Part parse_part(const std::string& text) {
  if (text == "1") return Part::kOne;
  if (text == "2") return Part::kTwo;
  if (text == "all") return Part::kAll;
  throw UsageError("--part must be 1, 2 or all (got '" + text + "')");
}

bool StagePlan::in(Part part) const {
  if (part == Part::kAll) return true;
  const int p = part == Part::kOne ? 1 : 2;
  return std::find(parts.begin(), parts.end(), p) != parts.end();
}

std::vector<StagePlan> gpu_check_plan(bool from_bundle) {
  return {
      {"env", {1, 2}, 20, "record the device (nvidia-smi -L), nvcc, NCCL, cmake, MPI and tool versions"},
      {"build", {1}, from_bundle ? 60 : 300,
       from_bundle ? "the bundle: sha256 of every file against manifest.json, device libraries linked, no build"
                   : "cmake -DSHARDTRAIN_CUDA=ON Release; build the tools and shardtrain_tests (dry run: use BUILD_DIR)"},
      {"data", {1, 2}, 90,
       "data/fortunes.h5 (scripts/prepare-data.sh when missing) and a synthetic Markov set for the benchmark"},
      {"gpu_tests", {1}, 150,
       "shardtrain_tests [gpu] (every CUDA op vs the CPU, fused attention, bf16 products, NCCL at W=1, the decoder "
       "vs the PyTorch files) and [nccl]"},
      {"cpu_gpu_equivalence", {1}, 60,
       "ddp-train --deterministic on cpu and on cuda --precision fp32: step-log losses within rtol 1e-3 (equiv-check)"},
      {"shared_gpu_2rank", {1}, 60,
       "mpirun -np 2 ddp-train --device cuda --transport mpi (host staging, both ranks on GPU 0) vs 1 rank: losses "
       "within rtol 1e-3"},
      {"deterministic_bitwise", {1}, 75,
       "--deterministic fp32 on cuda: 2 ranks sharing the GPU vs 1 rank, params.h5 BITWISE (equiv-check)"},
      {"resume_cross_device", {1}, 90,
       "a cuda checkpoint resumed on cpu and a cpu one on cuda (fp32) vs a cpu-only run: WITHIN rtol 1e-3; a bf16 "
       "checkpoint resumes on cpu"},
      {"bf16_vs_fp32", {2}, 180,
       "the foundation model 200 steps on fortunes, bf16 vs fp32: every logged loss after warm-up within 2%, hold-out "
       "within 1%"},
      {"gpt2_124m", {2}, 150,
       "GPT-2 124M (12 x 768, 12 heads, T 1024, vocab 50304) bf16: tokens/s, MFU (6N + 12LTC) vs the measured and the "
       "datasheet peak"},
      {"cpu_scaling", {2}, 200,
       "scale-bench run --workers 1,2,4,8 on CPU ranks (16 cores: not oversubscribed): the E(W) table"},
  };
}

std::vector<std::string> parse_only(const std::string& text, const std::vector<StagePlan>& plan) {
  std::vector<std::string> names;
  std::stringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    if (name.empty()) continue;
    const bool known =
        std::any_of(plan.begin(), plan.end(), [&](const StagePlan& s) { return s.name == name; });
    if (!known) {
      std::string all;
      for (const auto& s : plan) all += (all.empty() ? "" : ",") + s.name;
      throw UsageError("--only: no stage '" + name + "' (the stages: " + all + ")");
    }
    names.push_back(name);
  }
  if (names.empty()) throw UsageError("--only needs a stage list, e.g. --only env,build");
  return names;
}

std::vector<StagePlan> select_stages(const std::vector<StagePlan>& plan, Part part,
                                     const std::vector<std::string>& only) {
  std::vector<StagePlan> out;
  for (const auto& s : plan) {
    const bool chosen = only.empty() ? s.in(part) : std::find(only.begin(), only.end(), s.name) != only.end();
    if (chosen) out.push_back(s);
  }
  return out;
}

bool fits_budget(double used_s, int limit_s, double budget_s) { return used_s + limit_s <= budget_s; }

std::string plan_text(const std::vector<StagePlan>& stages, const std::string& part, bool dry,
                      const std::string& results_dir) {
  std::string out = "gpu-check plan (part " + part + (dry ? ", dry run on the CPU" : "") + "; results under " +
                    results_dir + "):\n";
  for (const auto& s : stages) {
    std::string parts;
    for (int p : s.parts) parts += std::to_string(p);
    char line[128];
    std::snprintf(line, sizeof line, "  %-22s part %-2s limit %4ds  ", s.name.c_str(), parts.c_str(), s.limit_s);
    out += line + s.what + "\n";
  }
  return out;
}

Sizes gpu_check_sizes(bool dry, int gpt2_micro_batch) {
  Sizes z;
  if (dry) {
    z.device = "cpu", z.low_precision = "fp32", z.high_precision = "fp32", z.transport = "mpi";
    z.steps_short = 4, z.steps_bf16 = 6, z.warmup = 2, z.gpt2_steps = 2, z.scale_steps = 4;
    z.scale_workers = {1, 2};
    z.small = {"--layers", "2", "--d-model", "64", "--heads", "2", "--seq-len", "32", "--threads", "1"};
    // The device's preset, shrunk by the explicit options that override it (the dry run checks the wiring).
    z.gpt2 = {"--model", "gpt2-small", "--layers", "2", "--d-model", "64", "--heads", "2", "--seq-len", "64",
              "--vocab", "512", "--micro-batch", "2", "--global-batch", "2"};
  } else {
    const std::string mb = std::to_string(gpt2_micro_batch);
    z.device = "cuda", z.low_precision = "bf16", z.high_precision = "fp32", z.transport = "mpi";
    z.steps_short = 12, z.steps_bf16 = 200, z.warmup = 20, z.gpt2_steps = 30, z.scale_steps = 30;
    z.scale_workers = {1, 2, 4, 8};
    z.small = {"--layers", "4", "--d-model", "256", "--heads", "4", "--seq-len", "256", "--threads", "1"};
    // GPT-2 small with its vocabulary padded to a multiple of 128 (50,304, as llm.c runs it on GPUs).
    z.gpt2 = {"--model", "gpt2-small", "--vocab", "50304", "--micro-batch", mb, "--global-batch", mb};
  }
  return z;
}

}  // namespace shardtrain::deviceproof
