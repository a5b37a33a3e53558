// The continual cycles (pipeline/cycles.hpp): options checked with the messages scripts/cycles.sh
// gave (scripts and users know them), the pattern's stage graph (order, cross-cycle needs,
// outcomes that are not failures), each stage's plan from what is in service, the last-known-good
// pointer read, the outcome lines; and the local runner and one-stage mode over stand-in tools
// that record their calls.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/pipeline/cycles.hpp"
#include "shardtrain/pipeline/pipeline.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::pipeline;

namespace {

CyclesArgs minimal_cycles() {
  CyclesArgs a;
  a.input = "docs.jsonl";
  a.snapshots = "2024-01-07T00:00:00Z,2024-01-13T00:00:00Z,2024-01-19T00:00:00Z";
  a.holdout_s = "172800";
  a.work = "w";
  a.home = "/clone";
  a.bin = "/b";
  return a;
}

std::string cycles_usage(const CyclesArgs& a) {
  try {
    validate_cycles(a, "/cwd");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> names(const StageGraph& g) {
  std::vector<std::string> out;
  for (const Stage& st : g.stages) out.push_back(st.name);
  return out;
}

bool contains_run(const std::vector<std::string>& argv, const std::vector<std::string>& run) {
  return std::search(argv.begin(), argv.end(), run.begin(), run.end()) != argv.end();
}

InService release(const std::string& checkpoint) {
  InService in;
  in.kind = InService::Kind::kRelease;
  in.checkpoint = checkpoint;
  return in;
}

InService baseline(const std::string& name) {
  InService in;
  in.kind = InService::Kind::kBaseline;
  in.baseline_name = name;
  return in;
}

}  // namespace

TEST_CASE("cycles graph: per cycle prep, monitor from cycle 2, train, decide, costs, then the total", "[pipeline]") {
  CyclesArgs a = minimal_cycles();
  a.np = "3";
  const CyclesSettings s = validate_cycles(a, "/cwd");
  const StageGraph g = build_cycles_graph(s);
  CHECK(names(g) == std::vector<std::string>{"cycle-1/prep", "cycle-1/train", "cycle-1/decide", "cycle-1/costs",
                                             "cycle-2/prep", "cycle-2/monitor", "cycle-2/train", "cycle-2/decide",
                                             "cycle-2/costs", "cycle-3/prep", "cycle-3/monitor", "cycle-3/train",
                                             "cycle-3/decide", "cycle-3/costs", "total"});
  // Each stage after its needs (the order the local runner walks and the submitter submits).
  for (std::size_t i = 0; i < g.stages.size(); ++i)
    for (const auto& need : g.stages[i].needs) {
      INFO(g.stages[i].name << " needs " << need);
      CHECK(std::find_if(g.stages.begin(), g.stages.begin() + long(i), [&](const Stage& st) { return st.name == need; }) !=
            g.stages.begin() + long(i));
    }
  CHECK(g.find("cycle-1/prep")->needs.empty());
  CHECK(g.find("cycle-3/prep")->needs.empty());  // a snapshot depends on the input alone
  CHECK(g.find("cycle-1/train")->needs == std::vector<std::string>{"cycle-1/prep"});
  CHECK(g.find("cycle-2/monitor")->needs == std::vector<std::string>{"cycle-2/prep", "cycle-1/decide"});
  CHECK(g.find("cycle-3/train")->needs == std::vector<std::string>{"cycle-3/prep", "cycle-3/monitor"});
  CHECK(g.find("cycle-2/costs")->needs == std::vector<std::string>{"cycle-2/decide"});
  CHECK(g.find("cycle-2/train")->ranks == 3);
  CHECK(g.find("cycle-2/decide")->ranks == 1);
  CHECK(g.find("cycle-2/monitor")->ok_up_to == 1);  // a rollback is an outcome
  CHECK(g.find("cycle-2/decide")->ok_up_to == 1);   // so is a reject
  CHECK(g.find("cycle-2/train")->ok_up_to == 0);
  CHECK(g.find("cycle-2/prep")->run_dir == "/cwd/w/cycle-2");
  CHECK(g.find("total")->after_all);
  CHECK(g.find("total")->run_dir == "/cwd/w");
  CHECK(parse_cycle_stage_name("cycle-12/monitor").cycle == 12);
  CHECK(parse_cycle_stage_name("cycle-12/monitor").step == "monitor");
  CHECK(parse_cycle_stage_name("total").cycle == 0);
  try {
    stage_named(g, "cycle-4/prep");
    FAIL("no error");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("unknown stage 'cycle-4/prep' (cycle-1/prep cycle-1/train") == 0);
  }
}

TEST_CASE("cycles options: the shell script's messages for missing and malformed options", "[pipeline]") {
  CyclesArgs a = minimal_cycles();
  a.work = "";
  CHECK(cycles_usage(a) == "--input, --snapshots, --holdout-s and --work are required (see --help)");
  a = minimal_cycles();
  a.holdout_s = "x";
  CHECK(cycles_usage(a) == "--holdout-s must be a positive whole number (got 'x')");
  a = minimal_cycles();
  a.np = "0";
  CHECK(cycles_usage(a) == "--np must be a positive whole number (got '0')");
  a = minimal_cycles();
  a.first_steps = "-3";
  CHECK(cycles_usage(a) == "--first-steps must be a positive whole number (got '-3')");
  a = minimal_cycles();
  a.snapshots = "soon";
  CHECK(cycles_usage(a).rfind("--snapshots: 'soon' is not a time (an RFC 3339 date-time", 0) == 0);
  a.snapshots = "2024-01-07T00:00:00Z,,2024-01-19T00:00:00Z";
  CHECK(cycles_usage(a).rfind("--snapshots: '' is not a time", 0) == 0);
  a.snapshots = "2024-01-13T00:00:00Z,2024-01-07T00:00:00Z";
  CHECK(cycles_usage(a) == "--snapshots: '2024-01-07T00:00:00Z' is not after '2024-01-13T00:00:00Z' (give the "
                           "snapshot times in the order they happen)");
  a = minimal_cycles();
  a.home = "";
  CHECK(cycles_usage(a).rfind("--policy: no release policy given and no clone found", 0) == 0);
  a.policy = "p.json";
  CHECK(cycles_usage(a) == "(no error)");
}

TEST_CASE("cycles options: defaults, absolute paths, and each snapshot's cutoff", "[pipeline]") {
  CyclesArgs a = minimal_cycles();
  a.steps = "25";
  a.train_args = "--layers 2  --heads 2";
  const CyclesSettings s = validate_cycles(a, "/cwd");
  CHECK(s.first_steps == 25);  // --steps when not given
  CHECK(s.work == "/cwd/w");
  CHECK(s.input == "/cwd/docs.jsonl");
  CHECK(s.registry == "/cwd/w/registry");
  CHECK(s.policy == "/clone/scripts/release-policy.json");
  CHECK(s.train_args == std::vector<std::string>{"--layers", "2", "--heads", "2"});
  REQUIRE(s.snapshots.size() == 3);
  CHECK(s.snapshots[0].time == "2024-01-07T00:00:00Z");
  CHECK(s.snapshots[0].cutoff == "2024-01-05T00:00:00Z");  // T - 2 days
  CHECK(s.snapshots[2].cutoff == "2024-01-17T00:00:00Z");
  CHECK(s.cycle_dir(2) == "/cwd/w/cycle-2");
  a.registry = "reg";
  a.policy = "/p.json";
  a.first_steps = "150";
  const CyclesSettings t = validate_cycles(a, "/cwd");
  CHECK(t.registry == "/cwd/reg");
  CHECK(t.policy == "/p.json");
  CHECK(t.first_steps == 150);
}

TEST_CASE("cycles plans: the monitor runs on a release in service, is skipped on a baseline or nothing", "[pipeline]") {
  const CyclesSettings s = validate_cycles(minimal_cycles(), "/cwd");
  const StageGraph g = build_cycles_graph(s);
  const Stage& mon = *g.find("cycle-3/monitor");
  const StagePlan run = plan_cycle_stage(s, mon, release("/ck"), 0);
  CHECK(run.skipped.empty());
  REQUIRE(run.commands.size() == 1);
  CHECK(run.commands[0].argv[0] == "/b/release-gate");
  CHECK(run.commands[0].argv[1] == "monitor");
  CHECK(contains_run(run.commands[0].argv, {"--since", "2024-01-13T00:00:00Z"}));  // T_(k-1)
  CHECK(contains_run(run.commands[0].argv, {"--data", "/cwd/w/cycle-3/data.h5"}));
  CHECK(contains_run(run.commands[0].argv, {"--data-prep", "/cwd/w/cycle-3/evidence/data-prep.json"}));
  CHECK(run.commands[0].log == "/cwd/w/cycle-3/monitor.log");
  CHECK(run.commands[0].ok_up_to == 1);
  const StagePlan skipped = plan_cycle_stage(s, mon, baseline("ngram-cycle-1"), 0);
  CHECK(skipped.skipped == "baseline ngram-cycle-1 in service: nothing to monitor");
  CHECK(skipped.commands.empty());
  CHECK(plan_cycle_stage(s, mon, InService{}, 0).skipped == "no release in service: nothing to monitor");
}

TEST_CASE("cycles plans: train fine-tunes from the release in service, else from scratch with --first-steps",
          "[pipeline]") {
  CyclesArgs a = minimal_cycles();
  a.np = "2";
  a.first_steps = "150";
  a.train_args = "--seq-len 32";
  const CyclesSettings s = validate_cycles(a, "/cwd");
  const StageGraph g = build_cycles_graph(s);
  const Stage& train = *g.find("cycle-2/train");
  const auto tuned = plan_cycle_stage(s, train, release("/reg/ck/step_60"), 0).commands.at(0).argv;
  CHECK(std::vector<std::string>(tuned.begin(), tuned.begin() + 4) ==
        std::vector<std::string>{"mpirun", "-np", "2", "/b/ddp-train"});
  CHECK(contains_run(tuned, {"--cutoff", "2024-01-11T00:00:00Z", "--steps", "60", "--ckpt-every", "60"}));
  CHECK(contains_run(tuned, {"--resume", "/reg/ck/step_60", "--fine-tune"}));
  CHECK(tuned.back() == "32");  // --train-args last
  for (const InService& in : {InService{}, baseline("ngram-cycle-1")}) {
    const auto scratch = plan_cycle_stage(s, train, in, 0).commands.at(0).argv;
    CHECK(contains_run(scratch, {"--steps", "150", "--ckpt-every", "150"}));
    CHECK(std::find(scratch.begin(), scratch.end(), "--resume") == scratch.end());
  }
}

TEST_CASE("cycles plans: decide registers an n-gram of the snapshot while nothing is in service", "[pipeline]") {
  CyclesArgs a = minimal_cycles();
  a.baseline_order = "2";
  a.baseline_args = "--max-samples 64";
  a.gate_args = "--max-samples 64";
  const CyclesSettings s = validate_cycles(a, "/cwd");
  const StageGraph g = build_cycles_graph(s);
  const StagePlan first = plan_cycle_stage(s, *g.find("cycle-1/decide"), InService{}, 32);
  REQUIRE(first.commands.size() == 2);
  const auto& reg = first.commands[0];
  CHECK(std::vector<std::string>(reg.argv.begin(), reg.argv.begin() + 3) ==
        std::vector<std::string>{"/b/release-gate", "baseline", "ngram-cycle-1"});
  CHECK(contains_run(reg.argv, {"--cutoff", "2024-01-05T00:00:00Z", "--order", "2", "--seq-len", "32", "--max-samples", "64"}));
  CHECK(reg.log == "/cwd/w/cycle-1/baseline.log");
  CHECK(reg.ok_up_to == 0);  // a baseline that cannot be registered fails the stage
  CHECK(contains_run(first.commands[1].argv, {"decide", "/cwd/w/cycle-1/checkpoints"}));
  CHECK(contains_run(first.commands[1].argv, {"--baseline", "ngram-cycle-1"}));
  CHECK(first.commands[1].ok_up_to == 1);
  const StagePlan later = plan_cycle_stage(s, *g.find("cycle-2/decide"), release("/ck"), 32);
  REQUIRE(later.commands.size() == 1);
  CHECK(contains_run(later.commands[0].argv, {"--baseline", "last-known-good"}));
  CHECK(later.commands[0].log == "/cwd/w/cycle-2/decide.log");
  const auto total = plan_cycle_stage(s, *g.find("total"), InService{}, 0).commands.at(0).argv;
  CHECK(total == std::vector<std::string>{"/b/release-gate", "costs", "/cwd/w/cycle-1", "/cwd/w/cycle-2", "/cwd/w/cycle-3",
                                          "--registry", "/cwd/w/registry", "--total", "/cwd/w/costs.json"});
}

TEST_CASE("cycles: the last-known-good pointer read: a release, a baseline, refusals", "[pipeline]") {
  const InService v1 = in_service_from_pointer(R"({"record": "records/a.json", "checkpoint": "/c/step_1"})", "lkg");
  CHECK(v1.kind == InService::Kind::kRelease);
  CHECK(v1.checkpoint == "/c/step_1");
  const InService b = in_service_from_pointer(
      R"({"format_version": 2, "record": null, "checkpoint": null, "baseline": {"name": "ngram-cycle-1", "sha256": "ab"}})",
      "lkg");
  CHECK(b.kind == InService::Kind::kBaseline);
  CHECK(b.baseline_name == "ngram-cycle-1");
  const InService r2 = in_service_from_pointer(R"({"format_version": 2, "checkpoint": "/c", "baseline": null})", "lkg");
  CHECK(r2.kind == InService::Kind::kRelease);
  CHECK_THROWS_AS(in_service_from_pointer(R"({"format_version": 3, "checkpoint": "/c"})", "lkg"), IoError);
  CHECK_THROWS_AS(in_service_from_pointer("not json", "lkg"), IoError);
  CHECK_THROWS_AS(in_service_from_pointer(R"({"record": "records/a.json"})", "lkg"), IoError);
  CHECK(read_in_service("/nonexistent-registry").kind == InService::Kind::kNone);
}

TEST_CASE("cycles: the outcome lines, from what each stage left", "[pipeline]") {
  const Snapshot snap{"2024-01-13T00:00:00Z", 0, ""};
  CHECK(cycle_stage_lines({2, "prep"}, snap, "", R"({"documents": 24, "not_yet_available": 36})") ==
        std::vector<std::string>{"snapshot as of 2024-01-13T00:00:00Z: 24 documents (36 not yet available)"});
  const std::string monitor = "release r2\nverdict: rolled_back\nslice owner=bob: worse\nrolled back: r2 -> r1\n";
  CHECK(cycle_stage_lines({3, "monitor"}, snap, monitor, "") ==
        std::vector<std::string>{"verdict: rolled_back rolled back: r2 -> r1"});
  const std::string decide = "decision: reject\n  reason a\n  reason b\n  reason c\n  reason d\nother\n";
  CHECK(cycle_stage_lines({3, "decide"}, snap, decide, "") ==
        std::vector<std::string>{"decision: reject   reason a   reason b   reason c"});
  CHECK(cycle_stage_lines({2, "monitor"}, snap, "skipped: baseline x in service: nothing to monitor\n", "") ==
        std::vector<std::string>{"baseline x in service: nothing to monitor"});
  CHECK(cycle_stage_lines({2, "costs"}, snap, "table\n", "").empty());
}

namespace {

// Stand-in tools in BIN (and mpirun, first on PATH): each appends "TOOL ARGS" to CALLS. ddp-train
// writes a summary.json into its --run-dir; release-gate decide promotes (writes last-known-good)
// unless DIR/reject exists (exit 1); release-gate monitor exits 1 (rolled back, an outcome); a
// file fail-TOOL makes TOOL exit 5.
struct FakeCycleBin {
  std::filesystem::path dir;
  std::string old_path;
  explicit FakeCycleBin(const std::string& tag) {
    dir = std::filesystem::temp_directory_path() / ("cycles_test_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "bin");
    const std::string calls = (dir / "calls").string(), d = dir.string();
    auto tool = [&](const std::string& name, const std::string& body) {
      const auto path = dir / "bin" / name;
      std::ofstream(path) << "#!/bin/sh\necho \"" << name << " $*\" >>" << calls << "\n[ -f " << d << "/fail-" << name
                          << " ] && exit 5\n" << body << "exit 0\n";
      std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    };
    tool("data-prep", "echo '{\"documents\": 3, \"not_yet_available\": 1}'\n");
    tool("mpirun", "shift 2; exec \"$@\"\n");
    tool("ddp-train", "while [ $# -gt 0 ]; do [ \"$1\" = --run-dir ] && echo '{\"data\": {\"seq_len\": 32}}' >\"$2/summary.json\"; shift; done\n");
    tool("release-gate",
         "case $1 in\n"
         "  decide) [ -f " + d + "/reject ] && { echo 'decision: reject'; exit 1; }\n"
         "          mkdir -p " + d + "/reg; echo '{\"checkpoint\": \"/ck\"}' >" + d + "/reg/last-known-good; echo 'decision: promote' ;;\n"
         "  monitor) echo 'verdict: keep'; exit 1 ;;\n"
         "esac\n");
    old_path = std::getenv("PATH");
    setenv("PATH", ((dir / "bin").string() + ":" + old_path).c_str(), 1);
  }
  ~FakeCycleBin() {
    setenv("PATH", old_path.c_str(), 1);
    std::filesystem::remove_all(dir);
  }
  CyclesSettings settings(const std::string& snapshots = "2024-01-07T00:00:00Z,2024-01-13T00:00:00Z") const {
    CyclesArgs a = minimal_cycles();
    a.snapshots = snapshots;
    a.bin = (dir / "bin").string();
    a.work = (dir / "w").string();
    a.registry = (dir / "reg").string();
    return validate_cycles(a, "/cwd");
  }
  std::vector<std::string> calls() const {
    std::ifstream in(dir / "calls");
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l.substr(0, l.find(' ', l.find(' ') + 1)));
    return out;
  }
  std::vector<std::string> lines_of(const std::string& file) const {
    std::ifstream in(file);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  std::vector<std::pair<std::string, int>> records(const std::string& run) const {
    std::vector<std::pair<std::string, int>> out;
    for (const StageRecord& r : read_stage_records(run + "/stages.jsonl")) out.emplace_back(r.stage, r.exit_status);
    return out;
  }
};

}  // namespace

TEST_CASE("cycles here: every stage in order, the registry read as each stage starts, records per cycle",
          "[pipeline]") {
  FakeCycleBin fake("ok");
  const CyclesSettings s = fake.settings();
  CHECK(run_cycles(s, "/self", {}) == 0);
  // Cycle 1: nothing in service -> the n-gram baseline before decide; cycle 2: the promoted release
  // is monitored (a rollback's exit 1 goes on) and fine-tuned from.
  CHECK(fake.calls() == std::vector<std::string>{"data-prep /cwd/docs.jsonl", "mpirun -np", "ddp-train --data",
                                                 "release-gate baseline", "release-gate decide", "release-gate costs",
                                                 "data-prep /cwd/docs.jsonl", "release-gate monitor", "mpirun -np",
                                                 "ddp-train --data", "release-gate decide", "release-gate costs",
                                                 "release-gate costs"});
  CHECK(fake.records(s.cycle_dir(1)) ==
        std::vector<std::pair<std::string, int>>{{"prep", 0}, {"train", 0}, {"decide", 0}, {"costs", 0}});
  CHECK(fake.records(s.cycle_dir(2)) ==
        std::vector<std::pair<std::string, int>>{{"prep", 0}, {"monitor", 1}, {"train", 0}, {"decide", 0}, {"costs", 0}});
  std::ifstream in(fake.dir / "calls");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(all.find("--resume /ck --fine-tune") != std::string::npos);
  CHECK(all.find("--seq-len 32") != std::string::npos);
  CHECK(nlohmann::json::parse(std::ifstream(s.cycle_dir(2) + "/evidence/data-prep.json"))["documents"] == 3);
}

TEST_CASE("cycles here: a failed stage ends the pattern with exit 1, the total still runs", "[pipeline]") {
  FakeCycleBin fake("fail");
  std::ofstream(fake.dir / "fail-ddp-train") << "";
  const CyclesSettings s = fake.settings();
  CHECK(run_cycles(s, "/self", {}) == 1);
  CHECK(fake.records(s.cycle_dir(1)) == std::vector<std::pair<std::string, int>>{{"prep", 0}, {"train", 5}});
  CHECK(fake.records(s.cycle_dir(2)).empty());
  CHECK(fake.calls().back() == "release-gate costs");  // the pattern's table, over the folders there are
}

TEST_CASE("cycles --stage: a reject is exit 0 (the chain goes on), a skipped monitor says why and records nothing",
          "[pipeline]") {
  FakeCycleBin fake("stage");
  CyclesSettings s = fake.settings();
  std::filesystem::create_directories(s.cycle_dir(2) + "/evidence");
  std::ofstream(fake.dir / "reject") << "";
  std::filesystem::create_directories(fake.dir / "reg");
  std::ofstream(fake.dir / "reg" / "last-known-good") << R"({"format_version": 2, "baseline": {"name": "ngram-cycle-1"}})";
  s.stage = "cycle-2/monitor";
  CHECK(run_cycles(s, "/self", {}) == 0);
  CHECK(fake.calls().empty());
  CHECK(fake.records(s.cycle_dir(2)).empty());
  std::ifstream log(s.cycle_dir(2) + "/monitor.log");
  std::string line;
  std::getline(log, line);
  CHECK(line == "skipped: baseline ngram-cycle-1 in service: nothing to monitor");
  s.stage = "cycle-2/decide";
  CHECK(run_cycles(s, "/self", {}) == 0);  // decide's exit 1, a reject: an outcome
  CHECK(fake.records(s.cycle_dir(2)) == std::vector<std::pair<std::string, int>>{{"decide", 1}});
  std::ofstream(fake.dir / "fail-release-gate") << "";
  CHECK(run_cycles(s, "/self", {}) == 5);  // a failure is the job's failure: afterok stops the chain
  s.stage = "cycle-9/prep";
  CHECK_THROWS_AS(run_cycles(s, "/self", {}), UsageError);
}

namespace {

// A stand-in Slurm on PATH: sbatch prints the next job id and runs the job's --wrap command at
// once (SLURM_JOB_ID set, output to --output), unless an afterok dependency failed or was
// cancelled (then the job is marked failed too, as --kill-on-invalid-dep cancels it); afterany
// always runs. --test-only accepts every shape; squeue finds nothing pending; scontrol says ended.
void fake_slurm(const FakeCycleBin& fake) {
  const std::string d = fake.dir.string();
  auto tool = [&](const std::string& name, const std::string& body) {
    const auto path = fake.dir / "bin" / name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  };
  tool("sbatch", "echo \"$*\" >>" + d + "/sbatch-calls\n"
                 "case \" $* \" in *\" --test-only \"*) exit 0 ;; esac\n"
                 "n=$(( $(cat " + d + "/next 2>/dev/null || echo 0) + 1 )); echo $n >" + d + "/next\n"
                 "dep=; out=; wrap=\n"
                 "while [ $# -gt 0 ]; do case $1 in --dependency=*) dep=${1#--dependency=} ;; --output=*) out=${1#--output=} ;;"
                 " --wrap) wrap=$2; shift ;; esac; shift; done\n"
                 "echo $n\n"
                 "case $dep in afterok:*) for id in $(echo ${dep#afterok:} | tr : ' '); do"
                 " [ -f " + d + "/bad-$id ] && { touch " + d + "/bad-$n; exit 0; }; done ;; esac\n"
                 "out=$(echo \"$out\" | sed \"s/%j/$n/\")\n"
                 "SLURM_JOB_ID=$n sh -c \"$wrap\" >\"$out\" 2>&1 </dev/null || touch " + d + "/bad-$n\n");
  tool("squeue", "exit 0\n");
  tool("scontrol", "echo \"JobId=$4 JobState=COMPLETED\"\n");
}

// The command line of these settings, as the tool re-runs it in each job.
std::vector<std::string> cycles_argv(const FakeCycleBin& fake) {
  return {"cycles", "--input", "/cwd/docs.jsonl", "--snapshots", "2024-01-07T00:00:00Z,2024-01-13T00:00:00Z",
          "--holdout-s", "172800", "--work", (fake.dir / "w").string(), "--registry", (fake.dir / "reg").string(),
          "--bin", (fake.dir / "bin").string(), "--policy", "/clone/scripts/release-policy.json", "--slurm"};
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("cycles --slurm: one dependency chain, jobs.txt per cycle, the stages' records told after the jobs",
          "[pipeline]") {
  FakeCycleBin fake("slurm");
  fake_slurm(fake);
  setenv("PIPELINE_PENDING_CHECK_S", "0", 1);
  CyclesSettings s = fake.settings();
  s.slurm = true;
  CHECK(run_cycles(s, test::tool_path("pipeline"), cycles_argv(fake)) == 0);
  // Jobs 1-4 cycle 1 (prep, train, decide, costs), 5-9 cycle 2 (prep, monitor, train, decide,
  // costs), 10 the total.
  CHECK(file_text(s.cycle_dir(1) + "/jobs.txt") == "prep 1\ntrain 2\ndecide 3\ncosts 4\n");
  CHECK(file_text(s.cycle_dir(2) + "/jobs.txt") == "prep 5\nmonitor 6\ntrain 7\ndecide 8\ncosts 9\n");
  CHECK(file_text(s.work + "/jobs.txt").find("cycle-2/monitor 6\n") != std::string::npos);
  const std::string calls = file_text((fake.dir / "sbatch-calls").string());
  CHECK(calls.find("--job-name=cycle-2-monitor --output=" + s.cycle_dir(2) + "/slurm-monitor-%j.out --ntasks=1 "
                   "--dependency=afterok:5:3 --wrap") != std::string::npos);
  CHECK(calls.find("--dependency=afterok:5:6 --wrap") != std::string::npos);  // cycle 2's train
  CHECK(calls.find("--job-name=cycles-total") != std::string::npos);
  CHECK(calls.find("--dependency=afterany:1:2:3:4:5:6:7:8:9 --wrap") != std::string::npos);
  CHECK(calls.find("--stage 'cycle-2/train'") != std::string::npos);
  // Each job recorded its stage with its job id (what release-gate costs pairs with Slurm's figures).
  std::vector<std::string> jobs;
  for (const StageRecord& r : read_stage_records(s.cycle_dir(2) + "/stages.jsonl")) jobs.push_back(r.job_id);
  CHECK(jobs == std::vector<std::string>{"5", "6", "7", "8", "9"});
  CHECK(file_text(fake.dir.string() + "/calls").find("--resume /ck --fine-tune") != std::string::npos);
}

TEST_CASE("cycles --slurm: a failed job stops the stages after it, is named, exit 1", "[pipeline]") {
  FakeCycleBin fake("slurmfail");
  fake_slurm(fake);
  setenv("PIPELINE_PENDING_CHECK_S", "0", 1);
  std::ofstream(fake.dir / "fail-ddp-train") << "";
  CyclesSettings s = fake.settings();
  s.slurm = true;
  CHECK(run_cycles(s, test::tool_path("pipeline"), cycles_argv(fake)) == 1);
  CHECK(fake.records(s.cycle_dir(1)) == std::vector<std::pair<std::string, int>>{{"prep", 0}, {"train", 5}});
  CHECK(fake.records(s.cycle_dir(2)) == std::vector<std::pair<std::string, int>>{{"prep", 0}});  // prep needs nothing
  CHECK(std::filesystem::exists(s.work + "/costs.log"));  // the total ran after all (afterany)
}
