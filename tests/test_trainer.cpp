// The training job end to end on one rank: bitwise reproducibility, learning a source of known
// entropy, and clear errors for bad batches and inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/h5file.hpp"
#include "shardtrain/telemetry/run_summary.hpp"
#include "shardtrain/data/synthetic.hpp"
#include "shardtrain/tool/train_cli.hpp"
#include "shardtrain/train/trainer.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

// The Markov corpus: 20 documents, one per day from 2024-01-01; a cutoff of 2024-01-17 trains on
// documents 0-15 and holds out 17-19 (event time after the cutoff).
struct MarkovCorpus {
  std::string path;
  double entropy = 0;
};
const MarkovCorpus& markov_corpus() {
  static MarkovCorpus corpus = [] {
    MarkovCorpus c;
    c.path = test::temp_dir("markov") + "/markov.h5";
    data::MarkovOptions options;
    c.entropy = data::write_markov_dataset(c.path, options).entropy_nats_per_token;
    return c;
  }();
  return corpus;
}

TrainOptions small_job(const std::string& run_dir) {
  TrainOptions o;
  o.data.path = markov_corpus().path;
  o.data.cutoff = "2024-01-17T00:00:00Z";
  o.model = ModelConfig{0, 32, 48, 2, 2};
  o.schedule.global_batch = 16;
  o.schedule.micro_batch = 8;
  o.schedule.steps = 6;
  o.optimizer.max_lr = 3e-3;
  o.optimizer.warmup_steps = 2;
  o.optimizer.decay_steps = 6;
  o.run_dir = run_dir;
  o.telemetry.log_every = 1000;
  o.evaluation.samples = 16;
  o.telemetry.peak_flop_per_s = 1e11;
  return o;
}

// The trainer tools' options parsed from `args` (after a --data); throws what CLI11 throws on a
// bad one (the tools print it and exit 2).
TrainOptions parse_training_args(std::vector<std::string> args) {
  CLI::App app{"trainer options under test"};
  TrainOptions o;
  TrainingCli cli;
  add_training_options(app, o, cli);
  args.insert(args.begin(), {"--data", "d.h5"});
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  app.parse(args);
  apply_model_preset(app, cli.model, o.model);
  finish_training_options(o, cli);
  return o;
}

std::vector<double> losses_of(const std::string& step_log) {
  std::ifstream in(step_log);
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

std::vector<float> params_of(const std::string& run_dir) {
  H5File f(run_dir + "/params.h5", H5File::Mode::kRead);
  std::vector<float> all;
  for (const auto& name : f.list("params")) {
    auto v = f.read_floats("params/" + name);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

}  // namespace

TEST_CASE("two runs with the same seed give bitwise-identical losses and parameters", "[trainer]") {
  test::ensure_mpi();
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    auto a = small_job(test::temp_dir("det-a"));
    auto b = small_job(test::temp_dir("det-b"));
    a.parallelism.threads = b.parallelism.threads = threads;
    run_training(a);
    run_training(b);
    const auto la = losses_of(a.run_dir + "/steps.rank0.jsonl"), lb = losses_of(b.run_dir + "/steps.rank0.jsonl");
    REQUIRE(la.size() == 6);
    CHECK(la == lb);
    const auto pa = params_of(a.run_dir), pb = params_of(b.run_dir);
    REQUIRE(pa.size() == pb.size());
    CHECK(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)) == 0);
    // A different seed is a different run.
    auto c = small_job(test::temp_dir("det-c"));
    c.schedule.seed = 2;
    c.parallelism.threads = threads;
    run_training(c);
    CHECK(losses_of(c.run_dir + "/steps.rank0.jsonl") != la);
  }
}

TEST_CASE("on the Markov source the hold-out loss gets within 5% of the true entropy", "[trainer][learning]") {
  // The best possible next-token loss is the chain's entropy rate H (nats/token, computed exactly
  // from its transition matrix); an order-1 source needs only the current token, so a small model
  // reaches it quickly. The bound is H * 1.05 on documents the model never trained on.
  test::ensure_mpi();
  auto o = small_job(test::temp_dir("learn"));
  o.model = ModelConfig{0, 64, 64, 2, 2};
  o.schedule.steps = 250;
  o.optimizer.max_lr = 1e-2;
  o.optimizer.min_lr = 1e-3;
  o.optimizer.warmup_steps = 20;
  o.optimizer.decay_steps = 250;
  o.optimizer.weight_decay = 0.0;
  o.evaluation.samples = 96;
  const auto summary = run_training(o);
  REQUIRE(summary);
  REQUIRE(summary->eval);
  const double holdout = summary->eval->loss;
  const double entropy = markov_corpus().entropy;
  INFO("hold-out loss " << holdout << " vs entropy " << entropy);
  CHECK(holdout >= entropy * 0.97);  // cannot beat the source (allowing sampling noise)
  CHECK(holdout <= entropy * 1.05);
  CHECK(summary->eval->loss_by_owner.size() == 2);
}

TEST_CASE("bad batches and inputs are refused with a message naming the problem", "[trainer][errors]") {
  test::ensure_mpi();
  auto o = small_job(test::temp_dir("err"));
  o.schedule.global_batch = 12;
  o.schedule.micro_batch = 8;
  CHECK_THROWS_AS(run_training(o), UsageError);
  CHECK_THROWS_WITH(run_training(o), Catch::Contains("12") && Catch::Contains("8"));
  o = small_job(test::temp_dir("err2"));
  o.data.path = "/nonexistent/data.h5";
  CHECK_THROWS_AS(run_training(o), IoError);
  o = small_job(test::temp_dir("err3"));
  o.model.vocab = 5;  // the Markov dataset has 17 tokens
  CHECK_THROWS_WITH(run_training(o), Catch::Contains("vocabulary 17") && Catch::Contains("--vocab"));
  o = small_job(test::temp_dir("err4"));
  o.model.n_head = 5;
  CHECK_THROWS_WITH(run_training(o), Catch::Contains("n_head"));
  // A wrong --baseline fails before training, not after it.
  o = small_job(test::temp_dir("err5"));
  o.telemetry.baseline_summary = o.run_dir + "/no-such-summary.json";
  CHECK_THROWS_AS(run_training(o), IoError);
  CHECK_FALSE(std::filesystem::exists(o.run_dir + "/steps.rank0.jsonl"));
}

TEST_CASE("slowest_rank: largest median step time minus exposed communication, found by column name", "[trainer]") {
  // Rank 1 computes longest (its peers wait in exposed communication); rank 2 has the longest
  // checkpoint column, which must not count.
  auto medians = std::vector<ColumnMedians>(3);
  const int step = timing_column("step_s"), exposed = timing_column("comm_exposed_s"), ckpt = timing_column("ckpt_s");
  REQUIRE(step >= 0);
  REQUIRE(exposed >= 0);
  REQUIRE(ckpt >= 0);
  const double step_s[] = {0.30, 0.30, 0.30}, exposed_s[] = {0.05, 0.01, 0.04}, ckpt_s[] = {0.0, 0.0, 0.9};
  for (int r = 0; r < 3; ++r) {
    medians[r].fill(0.0);
    medians[r][step] = step_s[r];
    medians[r][exposed] = exposed_s[r];
    medians[r][ckpt] = ckpt_s[r];
  }
  CHECK(slowest_rank(medians) == 1);
  CHECK(timing_column("no_such_column") == -1);
}


TEST_CASE("trainer --precision: auto and fp32 train in fp32 on the cpu, bf16 on the cpu is refused before any work", "[trainer][precision]") {
  test::ensure_mpi();
  auto o = small_job(test::temp_dir("prec_bf16"));
  o.parallelism.precision = Precision::kBf16;
  CHECK_THROWS_AS(run_training(o), UsageError);
  CHECK_THROWS_WITH(run_training(o), Catch::Contains("--precision bf16") && Catch::Contains("--device cuda"));
  CHECK_FALSE(std::filesystem::exists(o.run_dir + "/steps.rank0.jsonl"));
  // Names are parsed once, at the command line: an unknown one never reaches the job.
  CHECK_THROWS_WITH(parse_training_args({"--precision", "fp16"}), Catch::Contains("--precision") && Catch::Contains("fp16"));
  o = small_job(test::temp_dir("prec_auto"));
  o.schedule.steps = 2;
  o.optimizer.decay_steps = 2;
  const auto run = run_training(o);  // precision "auto"
  REQUIRE(run);
  const nlohmann::json summary = json_fields::write(*run);  // as summary.json has it
  CHECK(summary["precision"] == "fp32");
  CHECK(summary["device_name"] == "");
  CHECK(summary["mfu_datasheet"].is_null());
  CHECK(summary["peak_flops_datasheet_per_rank"].is_null());
  CHECK(summary_paragraph(*run).find("datasheet") == std::string::npos);
  // A summary that has a datasheet figure says so in its paragraph.
  auto with_datasheet = *run;
  with_datasheet.mfu_datasheet = 0.5;
  with_datasheet.device_name = "NVIDIA H200";
  with_datasheet.precision = Precision::kBf16;
  CHECK(summary_paragraph(with_datasheet).find("50.0% of the NVIDIA H200's datasheet dense bf16 peak") !=
        std::string::npos);
}

TEST_CASE("trainer --transport: nccl needs --device cuda, unknown names are refused", "[trainer][precision]") {
  test::ensure_mpi();
  auto o = small_job(test::temp_dir("transport_nccl"));
  o.parallelism.transport = Transport::kNccl;
  CHECK_THROWS_WITH(run_training(o), Catch::Contains("--transport nccl") && Catch::Contains("--device cuda"));
  CHECK_THROWS_WITH(parse_training_args({"--transport", "gloo"}), Catch::Contains("--transport") && Catch::Contains("gloo"));
  CHECK_FALSE(std::filesystem::exists(o.run_dir + "/steps.rank0.jsonl"));
}

TEST_CASE("trainer options: --model names GPT-2's shapes and explicit shape options override it", "[trainer][cli]") {
  // GPT-2 small as published (the Hugging Face gpt2 config: n_layer 12, n_embd 768, n_head 12,
  // n_positions 1024, vocab_size 50257): 124,439,808 parameters with the tied LM head.
  const ModelConfig small = parse_training_args({"--model", "gpt2-small"}).model;
  CHECK(small == ModelConfig{50257, 1024, 768, 12, 12});
  CHECK(small.parameter_count() == 124439808);
  // gpt2-medium: 24 layers, 1024 wide, 16 heads: 354,823,168 parameters (the published 355M).
  CHECK(parse_training_args({"--model", "gpt2-medium"}).model.parameter_count() == 354823168);
  // Explicit options win, whatever their order on the command line.
  const ModelConfig short_context = parse_training_args({"--seq-len", "256", "--model", "gpt2-small", "--layers", "2"}).model;
  CHECK(short_context == ModelConfig{50257, 256, 768, 2, 12});
  // Without --model the defaults stand.
  CHECK(parse_training_args({}).model == TrainOptions{}.model);
  CHECK_THROWS_WITH(parse_training_args({"--model", "gpt3"}),
                    Catch::Contains("--model: 'gpt3' is not a known model") && Catch::Contains("gpt2-small, gpt2-medium"));
}

TEST_CASE("trainer options: --device, --precision, --transport and --allreduce are parsed once into enums", "[trainer][cli]") {
  const TrainOptions defaults = parse_training_args({});
  CHECK(defaults.parallelism.device == DeviceKind::kCpu);
  CHECK_FALSE(defaults.parallelism.precision.has_value());  // auto
  CHECK(defaults.parallelism.transport == Transport::kAuto);
  CHECK(defaults.parallelism.allreduce == AllReduceAlgorithm::kAuto);
  const TrainOptions o = parse_training_args(
      {"--device", "cuda", "--precision", "bf16", "--transport", "mpi", "--allreduce", "halving", "--steps", "70"});
  CHECK(o.parallelism.device == DeviceKind::kCuda);
  CHECK(o.parallelism.precision == Precision::kBf16);
  CHECK(o.parallelism.transport == Transport::kMpi);
  CHECK(o.parallelism.allreduce == AllReduceAlgorithm::kHalvingDoubling);
  CHECK(o.schedule.steps == 70);
  CHECK(o.optimizer.decay_steps == 70);  // "default: --steps" (above the default warm-up)
  CHECK(parse_training_args({"--precision", "auto"}).parallelism.precision == std::nullopt);
  CHECK(parse_training_args({"--precision", "fp32"}).parallelism.precision == Precision::kFp32);
  CHECK(parse_training_args({"--transport", "nccl"}).parallelism.transport == Transport::kNccl);
  CHECK(parse_training_args({"--allreduce", "mpi"}).parallelism.allreduce == AllReduceAlgorithm::kLibrary);
  CHECK(parse_training_args({"--allreduce", "hierarchical"}).parallelism.allreduce == AllReduceAlgorithm::kHierarchical);
  // A bad name is one line naming the option, the name and every allowed one.
  CHECK_THROWS_AS(parse_training_args({"--device", "tpu"}), CLI::ValidationError);
  CHECK_THROWS_WITH(parse_training_args({"--device", "tpu"}), "--device: 'tpu' is not one of cpu, cuda");
  CHECK_THROWS_WITH(parse_training_args({"--precision", "fp16"}), "--precision: 'fp16' is not one of auto, bf16, fp32");
  CHECK_THROWS_WITH(parse_training_args({"--transport", "gloo"}), "--transport: 'gloo' is not one of auto, mpi, nccl");
  CHECK_THROWS_WITH(parse_training_args({"--allreduce", "ring"}),
                    "--allreduce: 'ring' is not one of auto, halving, mpi, hierarchical");
  CHECK_THROWS_WITH(parse_training_args({"--device", "1"}), Catch::Contains("not one of cpu, cuda"));  // no enum numbers
}
