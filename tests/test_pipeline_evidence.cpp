// A run folder's release evidence (pipeline/evidence.hpp): each item's command as the chain's
// stages and `pipeline evidence` both run it, and make_evidence over stand-in tools that write the
// file their real counterpart writes (or not, when told to fail): one line per item, a failed item
// named while the others are still made, the exit status, and the usage errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/pipeline/evidence.hpp"
#include "shardtrain/telemetry/run_evidence.hpp"

using namespace shardtrain;
using namespace shardtrain::pipeline;
namespace fs = std::filesystem;

namespace {

// A bin folder of stand-ins. Each appends "TOOL ARGS" to CALLS; equiv-check writes {"verdict": V}
// to the file after --json (V from EQUIV_VERDICT, default BITWISE) and exits with the number in
// the file equiv-exit (0 without); kill-resume-proof writes {"verdict": "BITWISE"} to --report's
// file; scale-bench writes report.json (no verdict) into --out's folder. A file fail-TOOL makes
// the tool exit 5 before writing anything.
struct StandInTools {
  fs::path dir;
  StandInTools() {
    dir = fs::temp_directory_path() / ("evidence_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "bin");
    fs::create_directories(dir / "run");
    write("equiv-check", "out=$(echo \"$*\" | sed 's/.*--json \\([^ ]*\\).*/\\1/')\n"
                         "echo '{\"verdict\": \"'\"${EQUIV_VERDICT:-BITWISE}\"'\"}' > \"$out\"\n"
                         "[ -f " + (dir / "equiv-exit").string() + " ] && exit $(cat " + (dir / "equiv-exit").string() + ")\n");
    write("kill-resume-proof", "out=$(echo \"$*\" | sed 's/.*--report \\([^ ]*\\).*/\\1/')\n"
                               "echo '{\"verdict\": \"BITWISE\", \"proof\": \"holds\"}' > \"$out\"\n");
    write("scale-bench", "out=$(echo \"$*\" | sed 's/.*--out \\([^ ]*\\).*/\\1/')\nmkdir -p \"$out\"\n"
                         "echo '{\"points\": []}' > \"$out/report.json\"\n");
  }
  ~StandInTools() { fs::remove_all(dir); }
  void write(const std::string& tool, const std::string& body) const {
    const fs::path path = dir / "bin" / tool;
    std::ofstream(path) << "#!/bin/sh\necho \"" << tool << " $*\" >>" << (dir / "calls").string() << "\n"
                        << "[ -f " << (dir / ("fail-" + tool)).string() << " ] && exit 5\n"
                        << body << "exit 0\n";
    fs::permissions(path, fs::perms::owner_all);
  }
  EvidenceArgs all_items() const {
    EvidenceArgs a;
    a.run = (dir / "run").string();
    a.bin = (dir / "bin").string();
    a.data_prep = (dir / "prep.json").string();
    std::ofstream(a.data_prep) << "{\"documents\": 3}\n";
    a.scaling_runs = {(dir / "one").string()};
    a.twin = {(dir / "one/params.h5").string(), (dir / "run/params.h5").string()};
    a.twin_args = "--group tensors";
    a.proof = true;
    a.proof_args = "--steps 12 --kills 1";
    return a;
  }
  std::vector<std::string> calls() const {
    std::ifstream in(dir / "calls");
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  std::string run_file(const char* relative) const { return (dir / "run" / relative).string(); }
};

// make_evidence's return and what it printed on std::cout.
std::pair<int, std::string> made(const EvidenceArgs& a) {
  std::ostringstream said;
  std::streambuf* was = std::cout.rdbuf(said.rdbuf());
  int rc = -1;
  try {
    rc = make_evidence(a, "/nowhere/pipeline");
  } catch (...) {
    std::cout.rdbuf(was);
    throw;
  }
  std::cout.rdbuf(was);
  return {rc, said.str()};
}

}  // namespace

TEST_CASE("evidence commands: each tool writes where the rubric reads (run_evidence.hpp)", "[pipeline]") {
  CHECK(kill_resume_command("/b", "/r", {"--steps", "12"}) ==
        std::vector<std::string>{"/b/kill-resume-proof", "--bin", "/b", "--steps", "12", "--report", "/r/evidence/kill-resume.json"});
  CHECK(equivalence_command("/b", "/r", "A", "B", {"--group", "tensors"}) ==
        std::vector<std::string>{"/b/equiv-check", "--json", "/r/evidence/equivalence.json", "A", "B", "--group", "tensors"});
  CHECK(scaling_report_command("/b", "/r", {"/one", "/four"}) ==
        std::vector<std::string>{"/b/scale-bench", "report", "/one", "/four", "/r", "--out", "/r/evidence/scaling"});
  // The paths are the ones decide looks up by item name.
  CHECK(run_evidence::path_of_item("kill_resume") == run_evidence::kKillResume);
  CHECK(run_evidence::path_of_item("deterministic_twin") == run_evidence::kEquivalence);
}

TEST_CASE("pipeline evidence: every item made, one line each, in the rubric's order", "[pipeline]") {
  StandInTools tools;
  const EvidenceArgs a = tools.all_items();
  const auto [rc, said] = made(a);
  CHECK(rc == 0);
  CHECK(said == "no_skipped_data: copied (evidence/data-prep.json)\n"
                "efficiency_report: written (evidence/scaling/report.json)\n"
                "deterministic_twin: BITWISE (evidence/equivalence.json)\n"
                "kill_resume: BITWISE (evidence/kill-resume.json)\n");
  CHECK(nlohmann::json::parse(std::ifstream(tools.run_file(run_evidence::kDataPrep)))["documents"] == 3);
  const auto calls = tools.calls();
  REQUIRE(calls.size() == 3);
  CHECK(calls[0] == "scale-bench report " + a.scaling_runs[0] + " " + a.run + " --out " + tools.run_file(run_evidence::kScalingFolder));
  CHECK(calls[1] == "equiv-check --json " + tools.run_file(run_evidence::kEquivalence) + " " + a.twin[0] + " " + a.twin[1] +
                        " --group tensors");
  CHECK(calls[2] == "kill-resume-proof --bin " + a.bin + " --steps 12 --kills 1 --report " + tools.run_file(run_evidence::kKillResume));
}

TEST_CASE("pipeline evidence: a twin that differs is made with its verdict, a failed tool named, the rest still made",
          "[pipeline]") {
  StandInTools tools;
  EvidenceArgs a = tools.all_items();
  std::ofstream(tools.dir / "equiv-exit") << "1";
  setenv("EQUIV_VERDICT", "NOT_EQUAL", 1);
  std::ofstream(tools.dir / "fail-scale-bench") << "";
  // A report left by an earlier run is not taken for this one's.
  fs::create_directories(tools.run_file(run_evidence::kScalingFolder));
  std::ofstream(tools.run_file(run_evidence::kScalingReport)) << "{}";
  const auto [rc, said] = made(a);
  unsetenv("EQUIV_VERDICT");
  CHECK(rc == 1);
  CHECK(said == "no_skipped_data: copied (evidence/data-prep.json)\n"
                "efficiency_report: FAILED (scale-bench exit 5): the release will be judged without it\n"
                "deterministic_twin: NOT_EQUAL (evidence/equivalence.json; equiv-check exit 1)\n"
                "kill_resume: BITWISE (evidence/kill-resume.json)\n");
  CHECK_FALSE(fs::exists(tools.run_file(run_evidence::kScalingReport)));
}

TEST_CASE("pipeline evidence: a tool that is not there fails its item only", "[pipeline]") {
  StandInTools tools;
  const EvidenceArgs a = tools.all_items();
  fs::remove(tools.dir / "bin" / "kill-resume-proof");
  const auto [rc, said] = made(a);
  CHECK(rc == 1);
  CHECK_THAT(said, Catch::Contains("deterministic_twin: BITWISE") &&
                       Catch::Contains("kill_resume: FAILED (" + a.bin + "/kill-resume-proof") &&
                       Catch::EndsWith("): the release will be judged without it\n"));
}

TEST_CASE("pipeline evidence: --scaling alone reports the run by itself", "[pipeline]") {
  StandInTools tools;
  EvidenceArgs a;
  a.run = (tools.dir / "run").string();
  a.bin = (tools.dir / "bin").string();
  a.scaling = true;
  CHECK(made(a).first == 0);
  CHECK(tools.calls() == std::vector<std::string>{"scale-bench report " + a.run + " --out " +
                                                  tools.run_file(run_evidence::kScalingFolder)});
}

TEST_CASE("pipeline evidence: usage errors name what to give, an unreadable summary is an I/O error", "[pipeline]") {
  StandInTools tools;
  EvidenceArgs nothing;
  nothing.run = (tools.dir / "run").string();
  CHECK_THROWS_WITH(made(nothing), Catch::Contains("nothing asked for") && Catch::Contains("--twin"));
  EvidenceArgs a = tools.all_items();
  a.twin = {"only-one"};
  CHECK_THROWS_AS(made(a), UsageError);
  a = tools.all_items();
  a.run = (tools.dir / "absent").string();
  CHECK_THROWS_WITH(made(a), Catch::Contains("absent") && Catch::Contains("no such run folder"));
  a = tools.all_items();
  a.data_prep = (tools.dir / "no-summary.json").string();
  CHECK_THROWS_AS(made(a), IoError);
  CHECK(tools.calls().empty());  // nothing ran for a refused command line
}
