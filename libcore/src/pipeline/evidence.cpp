// A run folder's release evidence (pipeline/evidence.hpp).
#include "shardtrain/pipeline/evidence.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/pipeline/stage_graph.hpp"
#include "shardtrain/telemetry/run_evidence.hpp"

namespace shardtrain::pipeline {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string in_run(const std::string& run, const char* relative) { return run + "/" + relative; }

// The folder an evidence file goes in, made (the tools write their file, not its folder).
void make_parent(const std::string& path) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) throw IoError(fs::path(path).parent_path().string() + ": cannot create the folder (" + ec.message() + ")");
}

// The "verdict" a tool wrote into its evidence file, or "written" where the file has none.
std::string verdict_in(const std::string& path) {
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object() && j.contains("verdict") && j["verdict"].is_string()) return j["verdict"].get<std::string>();
  return "written";
}

// Runs one item's tool with its stdout kept back (its file removed first, so an old one is never
// taken for its answer), then says one line about the item. A tool that wrote its file and exited
// non-zero (equiv-check on files that differ) made the item, with that verdict. Returns whether the
// tool exited 0.
bool run_item(const char* item, const std::vector<std::string>& argv, const std::string& file, const std::string& shown) {
  make_parent(file);
  std::error_code ec;
  fs::remove(file, ec);
  ChildOutput out;
  try {
    out = run_child_captured(argv);
  } catch (const IoError& e) {  // the tool is not there, or cannot start: this item fails, not the others
    std::cout << item << ": FAILED (" << e.what() << "): the release will be judged without it" << std::endl;
    return false;
  }
  const std::string tool = fs::path(argv[0]).filename().string() + " exit " + std::to_string(out.status);
  if (!fs::exists(file))
    std::cout << item << ": FAILED (" << tool << "): the release will be judged without it" << std::endl;
  else
    std::cout << item << ": " << verdict_in(file) << " (" << shown << (out.status != 0 ? "; " + tool : "") << ")"
              << std::endl;
  return out.status == 0;
}

}  // namespace

std::vector<std::string> kill_resume_command(const std::string& bin, const std::string& run,
                                             const std::vector<std::string>& proof_args) {
  return join(join({bin + "/kill-resume-proof", "--bin", bin}, proof_args),
              {"--report", in_run(run, run_evidence::kKillResume)});
}

std::vector<std::string> equivalence_command(const std::string& bin, const std::string& run, const std::string& a,
                                             const std::string& b, const std::vector<std::string>& equiv_args) {
  return join({bin + "/equiv-check", "--json", in_run(run, run_evidence::kEquivalence), a, b}, equiv_args);
}

std::vector<std::string> scaling_report_command(const std::string& bin, const std::string& run,
                                                const std::vector<std::string>& earlier_runs) {
  return join(join({bin + "/scale-bench", "report"}, earlier_runs),
              {run, "--out", in_run(run, run_evidence::kScalingFolder)});
}

int make_evidence(const EvidenceArgs& a, const std::string& self) {
  if (!fs::is_directory(a.run)) throw UsageError(a.run + ": no such run folder (the RUN of pipeline evidence)");
  if (a.data_prep.empty() && !a.scaling && a.scaling_runs.empty() && a.twin.empty() && !a.proof)
    throw UsageError("pipeline evidence: nothing asked for: give --data-prep, --scaling, --twin or --proof");
  if (!a.twin.empty() && a.twin.size() != 2)
    throw UsageError("--twin takes two files (the twin's, then the run's own), not " + std::to_string(a.twin.size()));
  const std::string bin = a.bin.empty() ? fs::path(self).parent_path().string() : a.bin;
  bool all_made = true;  // every tool exited 0
  if (!a.data_prep.empty()) {
    std::ifstream in(a.data_prep);
    std::stringstream text;
    if (!(in && text << in.rdbuf()))
      throw IoError(a.data_prep + ": cannot read data-prep's summary (--data-prep): run data-prep, or name its JSON");
    const std::string file = in_run(a.run, run_evidence::kDataPrep);
    make_parent(file);
    write_file_atomically(file, text.str());
    std::cout << "no_skipped_data: copied (" << run_evidence::kDataPrep << ")" << std::endl;
  }
  if (a.scaling || !a.scaling_runs.empty())
    all_made &= run_item("efficiency_report", scaling_report_command(bin, a.run, a.scaling_runs),
                         in_run(a.run, run_evidence::kScalingReport), run_evidence::kScalingReport);
  if (!a.twin.empty())
    all_made &= run_item("deterministic_twin", equivalence_command(bin, a.run, a.twin[0], a.twin[1], split_words(a.twin_args)),
                         in_run(a.run, run_evidence::kEquivalence), run_evidence::kEquivalence);
  if (a.proof)
    all_made &= run_item("kill_resume", kill_resume_command(bin, a.run, split_words(a.proof_args)),
                         in_run(a.run, run_evidence::kKillResume), run_evidence::kKillResume);
  return all_made ? 0 : 1;
}

}  // namespace shardtrain::pipeline
