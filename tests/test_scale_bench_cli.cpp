// scale-bench's command line: bad input refused in one line, --model NAME and --step-model FILE.
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

TEST_CASE("bad input: workers, files, budgets are usage errors naming the thing", "[scaling-model]") {
  CHECK(parse_workers("1,2,4") == std::vector<int>{1, 2, 4});
  CHECK_THROWS_WITH(parse_workers("0"), Catch::Contains("--workers") && Catch::Contains("not in [1"));
  CHECK_THROWS_WITH(parse_workers("two"), Catch::Contains("'two' is not a whole number"));
  CHECK_THROWS_WITH(parse_workers("1,,2"), Catch::Contains("is not a whole number"));
  CHECK_THROWS_WITH(parse_workers(""), Catch::Contains("--workers is empty"));
  CHECK_THROWS_AS(parse_workers("4x"), UsageError);
  CHECK_THROWS_WITH(parse_bytes("-8GB", "--memory-per-rank"), Catch::Contains("--memory-per-rank") && Catch::Contains("positive"));
  CHECK(parse_bytes("8GB", "x") == 8e9);
  CHECK(parse_bytes("1GiB", "x") == 1073741824.0);
  CHECK_THROWS_WITH(parse_bytes("8 parsecs", "--memory-per-rank"), Catch::Contains("unknown unit"));

  const fs::path dir = fresh_dir("bad");
  CHECK_THROWS_WITH(read_collectives((dir / "missing.json").string(), ""), Catch::Contains("missing.json") && Catch::Contains("cannot open"));
  write_text(dir / "broken.json", "{\"format\": \"shardtrain-collectives\", \"rows\": [");
  CHECK_THROWS_WITH(read_collectives((dir / "broken.json").string(), ""), Catch::Contains("broken.json") && Catch::Contains("not valid JSON"));
  write_text(dir / "other.json", "{\"format\": \"something\"}");
  CHECK_THROWS_WITH(read_collectives((dir / "other.json").string(), ""), Catch::Contains("not a collectives sweep"));
  write_text(dir / "notime.json", R"({"format":"shardtrain-collectives","rows":[{"op":"AllReduce","impl":"mpi","ranks":2,"bytes":8}]})");
  CHECK_THROWS_WITH(read_collectives((dir / "notime.json").string(), ""),
                    Catch::Contains("notime.json") && Catch::Contains("no field /format_version"));
  write_text(dir / "notime.json", R"({"format":"shardtrain-collectives","format_version":1,"ranks":2,"rows":[{"op":"AllReduce","impl":"mpi","ranks":2,"bytes":8,"iterations":2}]})");
  CHECK_THROWS_WITH(read_collectives((dir / "notime.json").string(), ""),
                    Catch::Contains("notime.json") && Catch::Contains("no field /rows/0/time_s"));
  write_text(dir / "badop.json", R"({"format":"shardtrain-collectives","format_version":1,"ranks":2,"rows":[{"op":"AllToAll","impl":"mpi","ranks":2,"bytes":8,"iterations":2,"time_s":1e-5,"algbw_GBps":0,"busbw_GBps":0,"wrong":0}]})");
  CHECK_THROWS_WITH(read_collectives((dir / "badop.json").string(), ""),
                    Catch::Contains("/rows/0/op") && Catch::Contains("'AllToAll' is not a collective"));
  CHECK_THROWS_WITH(StepModel::from_json(nlohmann::json{{"format", "shardtrain-scaling-model"}, {"version", 1}}, "m.json"),
                    Catch::Contains("m.json: the step model has no field /compute_s"));
  CHECK_THROWS_WITH(StepModel::from_json(nlohmann::json{{"format", "shardtrain-scaling-model"}}, "m.json"),
                    Catch::Contains("m.json: the step model has no field /version"));
  CHECK_THROWS_WITH(read_run((dir / "norun").string()), Catch::Contains("norun/summary.json"));

  PlanOptions p;
  p.params = 1e8;
  p.ranks = 2;
  p.memory_per_rank = -8e9;
  p.model.busbw_Bps = 1e9;
  CHECK_THROWS_WITH(plan_layouts(p), Catch::Contains("--memory-per-rank must be > 0"));

  // Through the subcommands: exit 2 for each bad input, 3 for a file that cannot be read (as the man
  // page says; the one JSON-file reader, base/json_file.hpp), 0 for good input.
  const std::string model = (dir / "model.json").string();
  write_text(dir / "model.json", seed_lab_model().to_json().dump());
  CHECK(run_scale_bench({"predict", "--step-model", model, "--workers", "1,2"}) == 0);
  CHECK(run_scale_bench({"predict", "--step-model", model, "--workers", "0"}) == 2);
  CHECK(run_scale_bench({"predict", "--step-model", model, "--workers", "x"}) == 2);
  CHECK(run_scale_bench({"predict", "--step-model", (dir / "missing.json").string()}) == 3);
  CHECK(run_scale_bench({"predict", "--step-model", (dir / "broken.json").string()}) == 2);
  CHECK(run_scale_bench({"predict", "--busbw-GBps", "450", "--alpha-us", "5"}) == 2);  // no compute
  CHECK(run_scale_bench({"predict", "--busbw-GBps", "450", "--alpha-us", "5", "--compute-ms", "120",
                         "--grad-bytes", "1e9", "--buckets", "25"}) == 0);
  CHECK(run_scale_bench({"fit", "--collectives", (dir / "missing.json").string(), "-o", (dir / "o.json").string()}) == 3);
  CHECK(run_scale_bench({"fit", "--collectives", (dir / "other.json").string(), "--overlap=-0.5", "-o",
                         (dir / "o.json").string()}) == 2);
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "0", "--memory-per-rank", "80GB", "--step-model", model}) == 2);
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "-8GB", "--step-model", model}) == 2);
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--step-model", model}) == 0);
  // --device takes the names of backend.hpp's kDeviceKindNames, as the trainers' --device does.
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--step-model", model,
                         "--device", "cuda"}) == 0);
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--step-model", model,
                         "--device", "gpu"}) == 2);
  fs::remove_all(dir);
}

TEST_CASE("predict --model NAME: one DDP step of the shape wherever the command line gives no workload", "[scaling-model]") {
  const auto predict = [](std::vector<std::string> args) {
    args.insert(args.begin(), "predict");
    for (const char* a : {"--busbw-GBps", "10", "--alpha-us", "5", "--workers", "1,2"}) args.push_back(a);
    return scale_bench_process(args);
  };
  const auto model_of = [](const test::ToolRun& r) { return nlohmann::json::parse(r.out)["model"]; };
  test::ToolRun r = predict({"--model", "gpt2-small", "--json"});
  REQUIRE(r.status == 0);
  nlohmann::json m = model_of(r);
  // The gradients: 4 bytes per parameter, all-reduced once per step as DDP does.
  REQUIRE(m["collectives"].size() == 1);
  CHECK(m["collectives"][0]["op"] == "AllReduce");
  CHECK(m["collectives"][0]["calls"].get<double>() == 1);
  CHECK(m["collectives"][0]["bytes"].get<double>() == 4 * kGpt2SmallParams);
  // One sequence of GPT-2's context, and its FLOPs at the default 100 GFLOP/s.
  CHECK(m["tokens_per_step"].get<double>() == 1024);
  CHECK(m["compute_s"].get<double>() == Approx(kGpt2SmallFlopsPerToken * 1024 / 100e9).epsilon(1e-12));
  CHECK(m["inputs"]["workload"]["model"] == "gpt2-small");
  // W = 2 prices that all-reduce by the ring: 2(W-1)/W x bytes / busbw + 2(W-1) x alpha.
  const nlohmann::json row2 = nlohmann::json::parse(r.out)["rows"][1];
  CHECK(row2["comm_s"].get<double>() == Approx(4 * kGpt2SmallParams / 10e9 + 2 * 5e-6).epsilon(1e-12));
  // --buckets splits the same bytes; --micro-batch and --peak-gflops size the tokens and compute.
  r = predict({"--model", "gpt2-small", "--buckets", "4", "--micro-batch", "4", "--peak-gflops", "1000", "--json"});
  REQUIRE(r.status == 0);
  m = model_of(r);
  CHECK(m["collectives"][0]["calls"].get<double>() == 4);
  CHECK(m["collectives"][0]["bytes"].get<double>() == kGpt2SmallParams);
  CHECK(m["tokens_per_step"].get<double>() == 4096);
  CHECK(m["compute_s"].get<double>() == Approx(kGpt2SmallFlopsPerToken * 4096 / 1000e9).epsilon(1e-12));
  // Explicit options override the shape's workload.
  r = predict({"--model", "gpt2-small", "--grad-bytes", "1e6", "--tokens-per-step", "10", "--compute-ms", "120", "--json"});
  REQUIRE(r.status == 0);
  m = model_of(r);
  CHECK(m["collectives"][0]["bytes"].get<double>() == 1e6);
  CHECK(m["tokens_per_step"].get<double>() == 10);
  CHECK(m["compute_s"].get<double>() == Approx(0.12));
  // The table says what --model set.
  r = predict({"--model", "gpt2-medium"});
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("workload of one step at W=1, --model gpt2-medium") && Catch::Contains("354823168 parameters") &&
                        Catch::Contains("gradients 4 x parameters = 1419292672 bytes"));
  // Refusals: the shape's sizing options without a shape, a rate that prices nothing, a bad batch.
  r = predict({"--micro-batch", "2", "--compute-ms", "1"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("add --model NAME"));
  CHECK(predict({"--model", "gpt2-small", "--compute-ms", "1", "--peak-gflops", "5"}).status == 2);
  CHECK(predict({"--model", "gpt2-small", "--micro-batch", "0"}).status == 2);
  CHECK(predict({"--model", "gpt2-tiny"}).status == 2);
}

TEST_CASE("scale-bench --step-model FILE is the step model file, --model FILE, the old form, is refused in one line", "[scaling-model]") {
  const std::string dir = test::temp_dir("step_model_rename");
  const std::string file = dir + "/model.json";
  write_text(file, seed_lab_model().to_json().dump());
  CHECK(scale_bench_process({"predict", "--step-model", file, "--workers", "1,2"}).status == 0);
  CHECK(scale_bench_process({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--step-model", file}).status == 0);
  // Scripts written before the rename: each subcommand that took the file says what to write now.
  const std::vector<std::vector<std::string>> old_forms = {
      {"predict", "--model", file, "--workers", "1,2"},
      {"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--model", file},
      {"report", "--model", file, "--out", dir + "/report", dir},
      {"run", "--workers", "1", "--out", dir + "/run", "--model", file, "--", "--steps", "1"}};
  for (const auto& args : old_forms) {
    INFO(args[0]);
    const test::ToolRun r = scale_bench_process(args);
    CHECK(r.status == 2);
    CHECK(lines_of(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains("scale-bench " + args[0] + ": --model names a model shape now") &&
                          Catch::Contains("--step-model " + file));
    CHECK(r.out.empty());
  }
  CHECK_FALSE(fs::exists(dir + "/report"));
  CHECK_FALSE(fs::exists(dir + "/run"));
  // run and report take no shape of their own: the trainer does (after --), a report reads it.
  test::ToolRun r = scale_bench_process({"run", "--workers", "1", "--out", dir + "/run", "--model", "gpt2-small", "--", "--steps", "1"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("give it after --"));
  r = scale_bench_process({"report", "--model", "gpt2-small", dir});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--step-model FILE"));
  // A path that does not exist is no file to point at: the unknown-name error, listing the names.
  r = scale_bench_process({"predict", "--model", dir + "/missing.json"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("is not a known model") && Catch::Contains("gpt2-small"));
}
