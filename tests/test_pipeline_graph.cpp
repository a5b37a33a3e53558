// The release chain's stage graph (pipeline/stage_graph.hpp): options checked with the messages
// users and scripts know, the graph built from them (order, needs, scale points), the commands
// it derives; and the local runner (pipeline/pipeline.hpp) over stand-in tools that record
// their calls: stages in order, the first failure stops the chain, costs always, stages.jsonl.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/pipeline/pipeline.hpp"
#include "test_support.hpp"
#include "shardtrain/pipeline/stage_graph.hpp"

using namespace shardtrain;
using namespace shardtrain::pipeline;

namespace {

PipelineArgs minimal() {
  PipelineArgs a;
  a.input = "docs.jsonl";
  a.cutoff = "2019-01-01T00:00:00Z";
  a.name = "exp";
  a.home = "/clone";
  return a;
}

std::vector<std::string> order(const StageGraph& g) {
  std::vector<std::string> names;
  for (const Stage& st : g.stages) names.push_back(st.name);
  return names;
}

std::string usage_message(const PipelineArgs& a) {
  try {
    validate(a, "/cwd");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("pipeline graph: the default chain, in an order that runs every stage after its needs", "[pipeline]") {
  const StageGraph g = build_graph(validate(minimal(), "/cwd"));
  CHECK(order(g) == std::vector<std::string>{"prep", "proof", "baseline", "twin", "equiv", "train", "report", "decide",
                                             "costs"});
  for (std::size_t i = 0; i < g.stages.size(); ++i)
    for (const auto& need : g.stages[i].needs) {
      INFO(g.stages[i].name << " needs " << need);
      const auto it = std::find_if(g.stages.begin(), g.stages.begin() + long(i),
                                   [&](const Stage& st) { return st.name == need; });
      CHECK(it != g.stages.begin() + long(i));
    }
  CHECK(g.find("decide")->needs == std::vector<std::string>{"prep", "equiv", "report", "proof"});
  CHECK(g.find("equiv")->needs == std::vector<std::string>{"baseline", "twin"});
  CHECK(g.find("costs")->after_all);
  CHECK(g.find("costs")->needs.empty());
  CHECK(g.names() == "prep proof baseline twin equiv train report decide costs");
}

TEST_CASE("pipeline graph: training stages carry ranks, folder and steps, step stages one task, proof two",
          "[pipeline]") {
  PipelineArgs a = minimal();
  a.np = "4";
  a.steps = "300";
  a.root = "r";
  const Settings s = validate(a, "/cwd");
  const StageGraph g = build_graph(s);
  CHECK(s.run == "/cwd/r/run/exp");
  const Stage& base = *g.find("baseline");
  CHECK((base.kind == StageKind::kTrain && base.ranks == 1 && base.steps == 40 && base.run_dir == s.run + "/baseline"));
  const Stage& twin = *g.find("twin");
  CHECK((twin.ranks == 4 && twin.steps == 40 && twin.run_dir == s.run + "/twin"));
  const Stage& train = *g.find("train");
  CHECK((train.ranks == 4 && train.steps == 300 && train.run_dir == s.run && train.needs == std::vector<std::string>{"prep"}));
  CHECK(g.find("prep")->kind == StageKind::kStep);
  CHECK(g.find("prep")->ranks == 1);
  CHECK(g.find("proof")->ranks == 2);
  CHECK(g.find("report")->outputs.front() == "evidence/scaling/report.json");
}

TEST_CASE("pipeline graph: --no-proof drops the stage and decide's need of it", "[pipeline]") {
  PipelineArgs a = minimal();
  a.proof = false;
  const StageGraph g = build_graph(validate(a, "/cwd"));
  CHECK(g.find("proof") == nullptr);
  CHECK(g.find("decide")->needs == std::vector<std::string>{"prep", "equiv", "report"});
}

TEST_CASE("pipeline graph: --scale-points deduplicated, 1 and --np left out, each a stage the report waits for",
          "[pipeline]") {
  PipelineArgs a = minimal();
  a.np = "2";
  a.scale_points = "4,1,8,2,4";
  const Settings s = validate(a, "/cwd");
  CHECK(s.scale == std::vector<int>{4, 8});
  const StageGraph g = build_graph(s);
  CHECK(order(g) == std::vector<std::string>{"prep", "proof", "baseline", "twin", "scale4", "scale8", "equiv", "train",
                                             "report", "decide", "costs"});
  CHECK(g.find("scale8")->run_dir == s.run + "/scale-w8");
  CHECK(g.find("scale8")->ranks == 8);
  CHECK(g.find("report")->needs == std::vector<std::string>{"baseline", "train", "scale4", "scale8"});
}

TEST_CASE("pipeline graph: a scale point the cluster cannot hold is dropped and the report's needs follow",
          "[pipeline]") {
  PipelineArgs a = minimal();
  a.scale_points = "4,64";
  Settings s = validate(a, "/cwd");
  s.scale = {4};  // what the submitter keeps after sbatch --test-only refused 64
  const StageGraph g = build_graph(s);
  CHECK(g.find("scale64") == nullptr);
  CHECK(g.find("report")->needs == std::vector<std::string>{"baseline", "train", "scale4"});
}

TEST_CASE("pipeline graph: an unknown stage is a usage error listing the stages", "[pipeline]") {
  const StageGraph g = build_graph(validate(minimal(), "/cwd"));
  CHECK(&stage_named(g, "costs") == g.find("costs"));
  try {
    stage_named(g, "scale9");
    FAIL("no error");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) == "unknown stage 'scale9' (prep proof baseline twin equiv train report decide costs)");
    CHECK(e.code() == ExitCode::kUsage);
  }
}

TEST_CASE("pipeline options: the shell pipeline's messages for missing and malformed options", "[pipeline]") {
  PipelineArgs a = minimal();
  a.name = "";
  CHECK(usage_message(a) == "--input, --cutoff and --name are required (see --help)");
  a = minimal();
  a.np = "0";
  CHECK(usage_message(a) == "--np must be a positive whole number (got '0')");
  a = minimal();
  a.seq_len = "12x";
  CHECK(usage_message(a) == "--seq-len must be a positive whole number (got '12x')");
  a = minimal();
  a.check_replicas = "-1";
  CHECK(usage_message(a) == "--check-replicas must be a positive whole number (got '-1')");
  a = minimal();
  a.scale_points = "4,x";
  CHECK(usage_message(a) == "--scale-points takes world sizes like 4,8 (got 'x')");
  a = minimal();
  a.base_steps = "0";
  CHECK(usage_message(a) == "--base-steps must be a positive whole number");
  a = minimal();
  a.device = "tpu";
  CHECK(usage_message(a) == "--device must be cpu or cuda");
  a = minimal();
  a.launcher = "ssh";
  CHECK(usage_message(a) == "--launcher must be srun or mpirun");
  CHECK(usage_message(minimal()) == "(no error)");
}

TEST_CASE("pipeline options: defaults filled in from HOME and ROOT, relative paths made absolute", "[pipeline]") {
  PipelineArgs a = minimal();
  a.steps = "25";
  Settings s = validate(a, "/cwd");
  CHECK(s.base_steps == 25);  // 40, or --steps when smaller
  CHECK(s.input == "/cwd/docs.jsonl");
  CHECK(s.root == "/clone");
  CHECK(s.registry == "/clone/run/registry");
  CHECK(s.policy == "/clone/scripts/release-policy.json");
  CHECK(s.data == "/clone/run/exp/data.h5");
  a.steps = "200";
  a.base_steps = "7";
  a.home = "";
  a.bin = "b";
  s = validate(a, "/cwd");
  CHECK(s.base_steps == 7);
  CHECK(s.root == "/cwd");
  CHECK(s.bin == "/cwd/b");
  CHECK(s.policy.empty());
}

TEST_CASE("pipeline commands: one learning-rate schedule unless given, the local training command", "[pipeline]") {
  PipelineArgs a = minimal();
  a.model = "--layers 2  --d-model 32";
  a.train_args = "--lr 1e-2";
  a.steps = "120";
  a.bin = "/b";
  Settings s = validate(a, "/cwd");
  const std::vector<std::string> common = common_train_args(s);
  const std::vector<std::string> want = {"--data", s.data, "--cutoff", "2019-01-01T00:00:00Z", "--seq-len", "256",
                                         "--layers", "2", "--d-model", "32", "--device", "cpu", "--deterministic",
                                         "--check-replicas", "50", "--decay-steps", "120", "--lr", "1e-2"};
  CHECK(common == want);
  s.train_args = "--decay-steps 9";
  const auto given = common_train_args(s);
  CHECK(std::count(given.begin(), given.end(), "--decay-steps") == 1);
  CHECK(std::find(given.begin(), given.end(), "9") != given.end());

  const StageGraph g = build_graph(s);
  const auto argv = local_train_argv(s, *g.find("twin"));
  REQUIRE(argv.size() > 12);
  CHECK(std::vector<std::string>(argv.begin(), argv.begin() + 12) ==
        std::vector<std::string>{"/b/run-resilient", "--max-restarts", "3", "--backoff", "2", "--log",
                                 s.run + "/twin/restarts.json", "--", "mpirun", "-np", "2", "/b/ddp-train"});
  CHECK(std::vector<std::string>(argv.end() - 10, argv.end()) ==
        std::vector<std::string>{"--steps", "40", "--ckpt-every", "50", "--keep", "2", "--resume", "auto", "--run-dir",
                                 s.run + "/twin"});
}

TEST_CASE("pipeline commands: --model NAME is the trainers' named shape, options stay as written", "[pipeline]") {
  CHECK(model_options("gpt2-small") == "--model gpt2-small");
  CHECK(model_options("  gpt2-medium ") == "--model gpt2-medium");
  CHECK(model_options("--layers 2 --d-model 32") == "--layers 2 --d-model 32");
  CHECK(model_options("--model gpt2-small --global-batch 8") == "--model gpt2-small --global-batch 8");
  PipelineArgs a = minimal();
  a.model = "gpt2-small";
  const Settings s = validate(a, "/cwd");
  const std::vector<std::string> common = common_train_args(s);
  const auto at = std::find(common.begin(), common.end(), "--model");
  REQUIRE(at != common.end());
  CHECK(*(at + 1) == "gpt2-small");
}

TEST_CASE("stage records: the one reader skips a torn line and names the file, line and field of a bad one", "[pipeline]") {
  const std::string dir = test::temp_dir("stage-records");
  const std::string file = dir + "/stages.jsonl";
  StageRecord a;
  a.stage = "prep";
  a.start = 10;
  a.end = 12.5;
  a.exit_status = 0;
  append_stage_record(file, a);
  CHECK(to_json_line(a) == R"({"end":12.5,"exit_status":0,"job_id":null,"ranks":1,"stage":"prep","start":10.0,"wall_s":2.5})");
  { std::ofstream(file, std::ios::app) << R"({"stage": "train", "ran)" << "\n"; }  // a stage killed mid-line
  { std::ofstream(file, std::ios::app) << R"({"stage": "old", "wall_s": 3, "exit_status": 0})" << "\n"; }  // no start/end
  const std::vector<StageRecord> read = read_stage_records(file);
  REQUIRE(read.size() == 2);
  CHECK(read[0].stage == "prep");
  CHECK(read[0].wall_s() == 2.5);
  CHECK(read[0].exit_status == 0);
  CHECK(read[0].ranks == 1);
  CHECK(read[0].job_id.empty());
  CHECK(read[1].wall_s() == 3);
  CHECK(read_stage_records(dir + "/none.jsonl").empty());
  const auto refused = [&](const std::string& line) {
    std::ofstream(dir + "/bad.jsonl") << line << "\n";
    return test::usage_error_of([&] { read_stage_records(dir + "/bad.jsonl"); });
  };
  const std::string at = dir + "/bad.jsonl:1: stage record ";
  CHECK(refused(R"({"ranks": 2})") == at + "has no field /stage");
  CHECK(refused(R"({"stage": "t", "ranks": 1e30})") == at + "field /ranks is not an integer (got 1e+30)");
  CHECK(refused(R"({"stage": "t", "ranks": 0})") == at + "field /ranks is 0, not in [1, 16777216]");
  CHECK(refused(R"({"stage": "t", "exit_status": "0"})") == at + "field /exit_status is not an integer (got \"0\")");
  CHECK(refused(R"({"stage": "t", "exit_status": 256})") == at + "field /exit_status is 256, not in [-255, 255]");
  CHECK(refused(R"({"stage": "t", "wall_s": "fast"})") == at + "field /wall_s is not a number (got \"fast\")");
  CHECK(refused(R"({"stage": "t", "wall_s": -1})") == at + "field /wall_s is -1.0, not >= 0.0");
  CHECK(refused(R"({"stage": "t", "job_id": 5})") == at + "field /job_id is not a string (got 5)");
}

TEST_CASE("pipeline: stage records and shell quoting", "[pipeline]") {
  StageRecord r;
  r.stage = "twin";
  r.ranks = 2;
  r.start = 100.25;
  r.end = 103.75;
  r.exit_status = 1;
  auto j = nlohmann::json::parse(to_json_line(r));
  CHECK(j["stage"] == "twin");
  CHECK(j["ranks"] == 2);
  CHECK(j["wall_s"].get<double>() == Approx(3.5));
  CHECK(j["exit_status"] == 1);
  CHECK(j["job_id"].is_null());
  r.job_id = "17";
  CHECK(nlohmann::json::parse(to_json_line(r))["job_id"] == "17");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("--model=--layers 2") == "'--model=--layers 2'");
}

namespace {

// A bin folder of stand-in tools: each appends its name and arguments to CALLS and exits with the
// status in FAIL_<name> (0 when unset); data-prep prints a summary.
struct FakeBin {
  std::filesystem::path dir;
  explicit FakeBin(const std::string& tag) {
    dir = std::filesystem::temp_directory_path() / ("pipeline_test_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "bin");
    for (const char* tool : {"data-prep", "kill-resume-proof", "run-resilient", "equiv-check", "scale-bench", "release-gate"}) {
      const auto path = dir / "bin" / tool;
      std::ofstream(path) << "#!/bin/sh\necho \"" << tool << " $*\" >>" << (dir / "calls").string() << "\n"
                          << (std::string(tool) == "data-prep" ? "echo '{\"documents\": 3, \"rejects\": {\"count\": 0}}'\n" : "")
                          << "[ -f " << (dir / ("fail-" + std::string(tool))).string() << " ] && exit 5\nexit 0\n";
      std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    }
  }
  ~FakeBin() { std::filesystem::remove_all(dir); }
  Settings settings() const {
    PipelineArgs a = minimal();
    a.bin = (dir / "bin").string();
    a.root = dir.string();
    a.policy = "/p.json";
    a.local = true;
    return validate(a, "/cwd");
  }
  std::vector<std::string> lines(const std::string& file) const {
    std::ifstream in(file);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  std::vector<std::string> tools_called() const {
    std::vector<std::string> out;
    for (const auto& l : lines((dir / "calls").string())) out.push_back(l.substr(0, l.find(' ')));
    return out;
  }
};

}  // namespace

TEST_CASE("pipeline --local: every stage in order, each timed into stages.jsonl", "[pipeline]") {
  FakeBin fake("ok");
  const Settings s = fake.settings();
  CHECK(run_local(s) == 0);
  CHECK(fake.tools_called() == std::vector<std::string>{"data-prep", "kill-resume-proof", "run-resilient",
                                                        "run-resilient", "equiv-check", "run-resilient", "scale-bench",
                                                        "release-gate", "release-gate", "release-gate", "release-gate"});
  std::vector<std::string> stages;
  for (const auto& line : fake.lines(s.run + "/stages.jsonl")) {
    const auto j = nlohmann::json::parse(line);
    stages.push_back(j["stage"]);
    CHECK(j["exit_status"] == 0);
    CHECK(j["end"].get<double>() >= j["start"].get<double>());
    CHECK(j.contains("wall_s"));
    CHECK(j.contains("job_id"));
  }
  CHECK(stages == std::vector<std::string>{"prep", "proof", "baseline", "twin", "equiv", "train", "report", "decide", "costs"});
  // data-prep's summary is the no_skipped_data evidence.
  CHECK(nlohmann::json::parse(std::ifstream(s.run + "/evidence/data-prep.json"))["documents"] == 3);
}

TEST_CASE("pipeline --local: the first failing stage stops the chain, costs still runs, its status returned",
          "[pipeline]") {
  FakeBin fake("fail");
  std::ofstream(fake.dir / "fail-equiv-check") << "";
  const Settings s = fake.settings();
  CHECK(run_local(s) == 5);
  std::vector<std::pair<std::string, int>> got;
  for (const auto& line : fake.lines(s.run + "/stages.jsonl")) {
    const auto j = nlohmann::json::parse(line);
    got.emplace_back(j["stage"], j["exit_status"]);
  }
  CHECK(got == std::vector<std::pair<std::string, int>>{
                   {"prep", 0}, {"proof", 0}, {"baseline", 0}, {"twin", 0}, {"equiv", 5}, {"costs", 0}});
}

TEST_CASE("pipeline --stage: one stage appended to stages.jsonl, a missing tool fails the stage, not the program",
          "[pipeline]") {
  FakeBin fake("stage");
  Settings s = fake.settings();
  CHECK(run_one_stage(s, "report") == 0);
  CHECK(fake.lines((fake.dir / "calls").string()) ==
        std::vector<std::string>{"scale-bench report " + s.run + "/baseline " + s.run + " --out " + s.run + "/evidence/scaling"});
  std::filesystem::remove(fake.dir / "bin" / "equiv-check");
  CHECK(run_one_stage(s, "equiv") == static_cast<int>(ExitCode::kIo));
  const auto records = fake.lines(s.run + "/stages.jsonl");
  REQUIRE(records.size() == 2);
  CHECK(nlohmann::json::parse(records[1])["stage"] == "equiv");
  CHECK_THROWS_AS(run_one_stage(s, "nope"), UsageError);
}
