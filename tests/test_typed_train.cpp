// Typed results of the training job (docs/ARCHITECTURE.md): the run summary and the parts it is
// made of each have one to_json/from_json pair; a populated value survives the round trip
// unchanged, the JSON keeps the summary.json keys scripts read, and a missing field is named.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/data/selection.hpp"
#include "shardtrain/data/synthetic.hpp"
#include "shardtrain/base/host.hpp"
#include "shardtrain/telemetry/run_summary.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

data::DataSelectionInfo populated_data() {
  data::DataSelectionInfo d;
  d.path = "/data/corpus.h5";
  d.dataset_snapshot_id = "ds0123";
  d.selection_snapshot_id = "sel4567";
  d.cutoff = "2024-01-17T00:00:00Z";
  d.eval_from = "2024-01-18T00:00:00Z";
  d.vocab = 17;
  d.tokenizer = "markov16";
  d.separator_token = 16;
  d.seq_len = 32;
  d.train = {16, 19216, 600};
  d.holdout_documents = 3;
  d.holdout_samples = 110;
  d.holdout_slices = {{"markov-a", 2, 2402, 75}, {"markov-b", 1, 1201, 35}};
  return d;
}

StragglerReport populated_stragglers() {
  StragglerReport r;
  r.threshold = 0.75;
  r.window = 10;
  r.min_share = 0.05;
  r.median_step_s = 0.125;
  for (int rank = 0; rank < 2; ++rank) {
    RankScores scores{rank, 40, 0.125 + 0.01 * rank, {}};
    for (int s = 0; s < kNumSections; ++s) {
      SectionScore& sc = scores.sections[std::size_t(s)];
      sc.median_s = 0.01 * (s + 1) + rank * 0.001;
      sc.ran_fraction = 1.0;
      sc.relative = 1.0 - 0.1 * rank;
      if (s % 2 == 0) sc.individual = 0.9;
      sc.lost_s = 0.002 * rank;
      sc.individual_lost_s = 0.001 * s;
    }
    r.ranks.push_back(scores);
  }
  r.stragglers.push_back({1, Section::kBackward, false, 0.6, 0.02, ""});
  r.not_named.push_back({0, Section::kData, true, 0.7, 0.0005, "b: under min_share of the step"});
  r.waited_for = 1;
  return r;
}

MemoryReport populated_memory(double scale) {
  MemoryReport m;
  for (int c = 0; c < kNumMemoryCategories; ++c) m.peak[std::size_t(c)] = scale * (c + 1);
  m.model_state = scale * 6;
  m.total = scale * 21;
  m.formula_model_state = scale * 5.5;
  m.zero_stage = 2;
  return m;
}

RunSummary populated_summary() {
  RunSummary s;
  s.tool = "fsdp-train";
  s.identity = {"cfg0123456789abc", "sel4567", "v1.2-3-gabc", "step_40"};
  s.config = {{"global_batch", 16}, {"seed", 7}, {"model", {{"d_model", 48}}}};
  s.data = populated_data();
  s.backend = "cpu (oneDNN, 1 thread)";
  s.layout = "ZeRO-2 over 2 ranks";
  s.parameters = 27040;
  s.world_size = 2;
  s.host = {"node17", 64};
  s.rank_hosts = {"node17", "node18"};
  s.steps = 40;
  s.first_step = 40;
  s.stopped_by_signal = true;
  s.checkpoint_dir = "run/checkpoints";
  s.tokens = 40 * 512;
  s.train_seconds = 5.25;
  s.wall_seconds = 6.5;
  s.throughput_tokens_per_s = 4096.5;
  s.median_step_s = 0.125;
  s.flops_per_token = 162240;
  s.peak_flops_per_rank = 1.5e11;
  s.mfu = 0.25;
  s.mfu_peak = {"measured with all 2 ranks at once", "measured", 2, false, 2, 64, 3.3e8, false};
  s.precision = Precision::kBf16;
  s.device_name = "NVIDIA H200";
  s.peak_flops_datasheet_per_rank = 9.89e14;
  s.mfu_datasheet = 0.125;
  s.first_loss = 2.83;
  s.final_loss = 2.61;
  s.per_rank_medians.columns["step_s"] = {{0.12, 0.125, 0.13}, {0.12, 0.13}};
  s.per_rank_medians.columns["data_s"] = {{0.001, 0.0015, 0.002}, {0.001, 0.002}};
  s.per_rank_medians.columns["comm_exposed_s"] = {{0.01, 0.015, 0.02}, {0.02, 0.01}};
  s.slowest_rank = 1;
  s.stragglers = populated_stragglers();
  s.exposed_comm_fraction = 0.16;
  s.communication.dp.wait_s = 0.5;
  s.communication.dp.all_reduce_algorithm = "halving";
  s.communication.dp.group_size = 2;
  s.communication.dp.per_op[int(CollectiveOp::kAllReduce)] = {40, 1 << 20, 0.25, 0.125};
  s.communication.bare_allreduce_busbw_GBps = 1.25;
  s.memory_bytes_rank0 = populated_memory(1000);
  s.memory_bytes_by_rank = {populated_memory(1000), populated_memory(1001)};
  s.eval = HoldoutLoss{2.65, 3600, {{"markov-a", 2.6}, {"markov-b", 2.75}}};
  s.replica_checks = {10, 4};
  s.step_log = "run/steps.rank0.jsonl";
  s.params = "run/params.h5";
  s.summary = "run/summary.json";
  s.scaling = ScalingVsBaseline{{"w1/summary.json", 2500.0, 1}, 1.6386, 0.8193};
  return s;
}

}  // namespace

TEST_CASE("typed train: DataSelectionInfo survives its JSON round trip, null times included", "[typed]") {
  const data::DataSelectionInfo d = populated_data();
  const nlohmann::json j = json_fields::write(d);
  CHECK(j["cutoff"] == "2024-01-17T00:00:00Z");  // the summary's "data" keys
  CHECK(j["train"]["samples"] == 600);
  CHECK(j["holdout"]["slices"][1]["owner"] == "markov-b");
  CHECK(test::read_back<data::DataSelectionInfo>(j) == d);
  data::DataSelectionInfo untimed = d;
  untimed.cutoff.reset();
  untimed.eval_from.reset();
  CHECK(json_fields::write(untimed)["cutoff"].is_null());
  CHECK(test::read_back<data::DataSelectionInfo>(json_fields::write(untimed)) == untimed);
  CHECK_FALSE(test::read_back<data::DataSelectionInfo>(json_fields::write(untimed)) == d);
  nlohmann::json missing = j;
  missing["holdout"].erase("samples");
  CHECK_THROWS_WITH(test::read_back<data::DataSelectionInfo>(missing), Catch::Contains("has no field /holdout/samples"));
}

TEST_CASE("typed train: the summary's parts survive their JSON round trips", "[typed]") {
  const PerRankTable table = populated_summary().per_rank_medians;
  const nlohmann::json tj = json_fields::write(table);
  CHECK(tj["data_s"]["by_rank"][1] == 0.002);
  CHECK(tj["data_s"]["median"] == 0.0015);
  CHECK(test::read_back<PerRankTable>(tj) == table);
  CHECK_THROWS_AS(table.at("no_such_column"), UsageError);

  const Baseline b{"w1/summary.json", 2500.0, 1};
  CHECK(test::read_back<Baseline>(json_fields::write(b)) == b);
  const ScalingVsBaseline vs = scaling_against(b, 4000.0, 2);
  CHECK(vs.speedup == Approx(1.6));
  CHECK(vs.scaling_efficiency == Approx(0.8));

  const MfuPeak peak = populated_summary().mfu_peak;
  CHECK(test::read_back<MfuPeak>(json_fields::write(peak)) == peak);
  MfuPeak given;
  given.basis = "given (--peak-gflops)";
  given.source = "given";
  CHECK(json_fields::write(given)["shared_cores"].is_null());
  CHECK(json_fields::write(given)["host_cpus"].is_null());
  CHECK(test::read_back<MfuPeak>(json_fields::write(given)) == given);

  const RunIdentity id{"cfg", "sel", "v1", ""};
  CHECK(json_fields::write(id)["checkpoint_id"].is_null());
  CHECK(test::read_back<RunIdentity>(json_fields::write(id)) == id);
  const StragglerReport stragglers = populated_stragglers();
  CHECK(test::read_back<StragglerReport>(stragglers.to_json()) == stragglers);
}

TEST_CASE("typed train: a populated RunSummary survives its JSON round trip with the summary.json keys", "[typed]") {
  const RunSummary s = populated_summary();
  const nlohmann::json j = json_fields::write(s);
  // Keys and values as scripts read them with jq and python.
  CHECK(j["precision"] == "bf16");
  CHECK(j["eval"]["holdout_loss"] == 2.65);
  CHECK(j["identity"]["checkpoint_id"] == "step_40");
  CHECK(j["host"]["cpus"] == 64);
  CHECK(j["rank_hosts"] == nlohmann::json({"node17", "node18"}));
  CHECK(j["per_rank_medians"]["step_s"]["by_rank"][1] == 0.13);
  CHECK(j["memory_bytes_by_rank"].size() == 2);
  CHECK(j["replica_checks"]["checks"] == 4);
  CHECK(j["baseline"]["throughput_tokens_per_s"] == 2500.0);  // --baseline's three top-level keys
  CHECK(j["speedup"] == 1.6386);
  CHECK(j["scaling_efficiency"] == 0.8193);
  CHECK(j["data"]["selection_snapshot_id"] == "sel4567");
  CHECK(j["communication"]["AllReduce"]["calls"] == 40);  // CommStats' keys, and the summary's own
  CHECK(j["communication"]["allreduce_algorithm"] == "halving");
  CHECK(j["communication"]["bare_allreduce_busbw_GBps"] == 1.25);
  CHECK_FALSE(j["communication"].contains("tp"));
  CHECK(test::read_back<RunSummary>(j) == s);

  // The optional parts: null where unknown, absent without --baseline.
  RunSummary bare = s;
  bare.eval.reset();
  bare.mfu_datasheet.reset();
  bare.peak_flops_datasheet_per_rank.reset();
  bare.scaling.reset();
  bare.precision = Precision::kFp32;
  const nlohmann::json bj = json_fields::write(bare);
  CHECK(bj["eval"].is_null());
  CHECK(bj["mfu_datasheet"].is_null());
  CHECK_FALSE(bj.contains("baseline"));
  CHECK_FALSE(bj.contains("speedup"));
  CHECK(bj["precision"] == "fp32");
  CHECK(test::read_back<RunSummary>(bj) == bare);
  CHECK_FALSE(test::read_back<RunSummary>(bj) == s);

  // A summary written before "rank_hosts" existed reads with no hosts; a mistyped one is named.
  nlohmann::json older = j;
  older.erase("rank_hosts");
  CHECK(test::read_back<RunSummary>(older).rank_hosts.empty());
  older["rank_hosts"] = {"node17", 18};
  CHECK_THROWS_WITH(test::read_back<RunSummary>(older), Catch::Contains("/rank_hosts/1"));
}

TEST_CASE("typed train: a run summary missing a field is refused naming the field (and the file)", "[typed]") {
  const nlohmann::json j = json_fields::write(populated_summary());
  for (const char* field : {"throughput_tokens_per_s", "eval", "memory_bytes_by_rank", "mfu_peak", "data"}) {
    INFO(field);
    nlohmann::json missing = j;
    missing.erase(field);
    CHECK_THROWS_WITH(test::read_back<RunSummary>(missing), Catch::Contains(std::string("has no field /") + field));
  }
  // A mistyped field, deep or not, is named by its JSON pointer too.
  nlohmann::json mistyped = j;
  mistyped["world_size"] = "two";
  CHECK_THROWS_WITH(test::read_back<RunSummary>(mistyped), Catch::Contains("field /world_size is not an integer"));
  mistyped = j;
  mistyped["per_rank_medians"]["step_s"]["by_rank"][1] = "slow";
  CHECK_THROWS_WITH(test::read_back<RunSummary>(mistyped),
                    Catch::Contains("field /per_rank_medians/step_s/by_rank/1 is not a number"));
  mistyped = j;
  mistyped["precision"] = "fp16";
  CHECK_THROWS_WITH(test::read_back<RunSummary>(mistyped), Catch::Contains("field /precision must be bf16 or fp32 (got 'fp16')"));
  const std::string dir = test::temp_dir("typed_summary");
  {
    nlohmann::json missing = j;
    missing["mfu_peak"].erase("basis");
    std::ofstream(dir + "/summary.json") << missing.dump();
  }
  CHECK_THROWS_AS(read_run_summary(dir + "/summary.json"), UsageError);
  CHECK_THROWS_WITH(read_run_summary(dir + "/summary.json"),
                    Catch::Contains(dir + "/summary.json") && Catch::Contains("has no field /mfu_peak/basis"));
  std::ofstream(dir + "/good.json") << j.dump();
  CHECK(read_run_summary(dir + "/good.json") == populated_summary());
  CHECK_THROWS_AS(read_run_summary(dir + "/none.json"), IoError);
}

TEST_CASE("typed train: a step record names the host and process that wrote it, an older line neither", "[typed]") {
  const std::string dir = test::temp_dir("typed_step_host");
  StepRecord r;
  r.step = 7;
  r.step_s = 0.25;
  {
    std::ofstream log(dir + "/steps.rank1.jsonl");
    log << r.to_json(1, RunIdentity{"cfg", "snap", "v1", ""}).dump() << "\n";
    log << R"({"step": 8, "rank": 1, "loss": 2.5})" << "\n";  // written before "host" and "pid" existed
  }
  const StepLogContents read = read_step_log(dir + "/steps.rank1.jsonl");
  REQUIRE(read.steps.size() == 2);
  CHECK(read.steps[0].host == host_name());
  CHECK(!read.steps[0].host.empty());
  CHECK(read.steps[0].pid == std::int64_t(getpid()));
  CHECK(read.steps[1].host.empty());
  CHECK(read.steps[1].pid == 0);
}

TEST_CASE("typed train: a step record's counts must be whole numbers that fit, its figures finite numbers", "[typed]") {
  // base/json_number's rule for every figure; a count ("tokens", "pid") must also be an integer:
  // converting 1e300 or 2.5 to an integer type would be undefined or silently wrong.
  const std::string dir = test::temp_dir("typed_step_numbers");
  const auto refusal = [&](const std::string& line) {
    std::ofstream(dir + "/steps.rank0.jsonl") << line << "\n";
    return test::usage_error_of([&] { read_step_log(dir + "/steps.rank0.jsonl"); });
  };
  CHECK(refusal(R"({"step": 1, "rank": 0, "tokens": 1e300})").find("'tokens' is not a whole number that fits (got 1e+300)") !=
        std::string::npos);
  CHECK(refusal(R"({"step": 1, "rank": 0, "pid": 2.5})").find("'pid' is not a whole number that fits (got 2.5)") != std::string::npos);
  CHECK(refusal(R"({"step": 1, "rank": 0, "tokens": 18446744073709551615})").find("'tokens' is not a whole number") !=
        std::string::npos);
  CHECK(refusal(R"({"step": 1, "rank": 0, "time": "noon"})").find("'time' is not a number (got \"noon\")") != std::string::npos);
  CHECK(refusal(R"({"step": 1, "rank": 0, "tokens": 4096, "pid": 7, "time": 1.5})") == "accepted");
}

TEST_CASE("typed train: the closing paragraph is written from the typed summary", "[typed]") {
  RunSummary s = populated_summary();
  const std::string p = summary_paragraph(s);
  CHECK(p.find("trained 40 steps") != std::string::npos);
  CHECK(p.find("hold-out loss 2.650") != std::string::npos);
  CHECK(p.find("12.5% of the NVIDIA H200's datasheet dense bf16 peak") != std::string::npos);
  CHECK(p.find("scaling efficiency E(2) = 0.819") != std::string::npos);
  CHECK(p.find("on 2 ranks (ZeRO-2 over 2 ranks) across 2 hosts (node17: 0; node18: 1) in") != std::string::npos);
  RunSummary one_host = s;
  one_host.rank_hosts = {"node17", "node17"};  // a one-node job does not list its host twice
  CHECK(summary_paragraph(one_host).find("across") == std::string::npos);
  s.eval.reset();
  s.scaling.reset();
  s.mfu_datasheet.reset();
  const std::string q = summary_paragraph(s);
  CHECK(q.find("hold-out") == std::string::npos);
  CHECK(q.find("scaling efficiency") == std::string::npos);
  CHECK(q.find("datasheet") == std::string::npos);
}

TEST_CASE("typed data: a data-prep result survives its JSON round trip, and a missing field is named", "[typed]") {
  data::DataPrepResult r;
  r.output = "/data/out.h5";
  r.documents = 5;
  r.tokens = 1234;
  r.owners = 3;
  r.vocab = 256;
  r.separator_token = 0;
  r.tokenizer = "bytes";
  r.token_bits = 8;
  r.event_time_min = "2024-01-01T00:00:00Z";
  r.event_time_max = "2024-03-01T00:00:00Z";
  r.available_time_min = std::nullopt;  // written as null, read back as none
  r.available_time_max = "2024-04-01T00:00:00Z";
  r.snapshot_id = "abc123";
  r.rejects = 2;
  r.rejects_file = "/data/rejects.jsonl";
  r.rejects_by_class = {{"malformed_json", 1}, {"bad_time", 1}};
  r.sources = {{"/in/a.jsonl", "ff00", 4096}, {"/in/b.jsonl", "00ff", 10}};
  r.input_bytes = 4106;
  r.seconds = 0.25;
  r.mb_per_s = 0.016424;
  r.code_version = "v1-test";
  const nlohmann::json j = r.to_json();
  CHECK(j["rejects"]["count"] == 2);  // the keys the pipeline's evidence and the RUNBOOK read
  CHECK(j["available_time"]["min"].is_null());
  CHECK(data::DataPrepResult::from_json(JsonFile::parse(j.dump(), "s.json", "the data-prep summary")) == r);
  nlohmann::json broken = j;
  broken["rejects"].erase("by_class");
  CHECK_THROWS_WITH(data::DataPrepResult::from_json(JsonFile::parse(broken.dump(), "s.json", "the data-prep summary")),
                    Catch::Contains("s.json") && Catch::Contains("/rejects/by_class"));
}

TEST_CASE("typed data: a real data-prep run and a Markov corpus, through their JSON", "[typed]") {
  const std::string dir = test::temp_dir("typed-data");
  data::MarkovOptions m;
  m.documents = 4;
  m.tokens_per_document = 50;
  const data::MarkovCorpus jsonl = data::write_markov_jsonl(dir + "/m.jsonl", m);
  CHECK_FALSE(jsonl.snapshot_id.has_value());
  CHECK_FALSE(jsonl.to_json().contains("snapshot_id"));
  CHECK(jsonl.to_json()["synthetic"]["documents"] == 4);
  const data::MarkovCorpus dataset = data::write_markov_dataset(dir + "/m.h5", m);
  REQUIRE(dataset.snapshot_id.has_value());
  CHECK(dataset.tokens == jsonl.tokens);
  data::DataPrepOptions o;
  o.jsonl_inputs = {dir + "/m.jsonl"};
  o.output = dir + "/p.h5";
  o.vocab = m.symbols + 1;
  o.tokenizer = "markov" + std::to_string(m.symbols);
  o.separator = m.symbols;
  o.progress_interval_s = 0;
  const data::DataPrepResult r = data::run_data_prep(o);
  CHECK(r.snapshot_id == *dataset.snapshot_id);  // the JSONL route gives the same dataset
  CHECK(data::DataPrepResult::from_json(JsonFile::parse(r.to_json().dump(), "p.json", "the data-prep summary")) == r);
}

TEST_CASE("typed train: the summary's communication, levels and TP group included, survives its JSON round trip", "[typed]") {
  RunSummary s = populated_summary();
  CommStats& dp = s.communication.dp;
  dp.all_reduce_algorithm = "hierarchical";
  dp.levels = {{"dp.node", false, {}}, {"dp.cross", true, {}}};
  dp.levels[0].stats.per_op[int(CollectiveOp::kReduceScatter)] = {20, 4096, 0.5, 0.25};
  dp.levels[1].stats.per_op[int(CollectiveOp::kAllReduce)] = {20, 2048, 1.5, 0.75};
  dp.levels[1].stats.group_size = 2;
  dp.nodes = 2;
  dp.ranks_per_node = 2;
  dp.hierarchical_from_bytes = {{CollectiveOp::kAllReduce, 2223}, {CollectiveOp::kReduceScatter, ~std::uint64_t(0)}};
  s.communication.tp = CommStats{};
  s.communication.tp->per_op[int(CollectiveOp::kAllGather)] = {8, 512, 0.01, 0.005};
  const nlohmann::json j = json_fields::write(s);
  CHECK(j["communication"]["levels"]["dp.cross"]["inter_node"] == true);
  CHECK(j["communication"]["inter_node_busy_s"] == 1.5);
  CHECK(j["communication"]["hierarchical_from_bytes"]["ReduceScatter"].is_null());  // never
  CHECK(j["communication"]["tp"]["AllGather"]["bytes"] == 512);
  const RunSummary back = test::read_back<RunSummary>(j);
  // The levels come back in the order of their names (a JSON object's), the rest field for field.
  CHECK(back.communication.dp.levels.size() == 2);
  CHECK(back.communication.dp.level_busy_s(true) == 1.5);
  CHECK(json_fields::write(back) == j);
  nlohmann::json missing = j;
  missing["communication"]["levels"]["dp.node"].erase("inter_node");
  CHECK_THROWS_WITH(test::read_back<RunSummary>(missing), Catch::Contains("/communication/levels/dp.node/inter_node"));
}
