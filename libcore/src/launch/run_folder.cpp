// What the resilient launcher reads from a run and moves in its run folder (run_folder.hpp).
#include "run_folder.hpp"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain::launch::detail {

namespace fs = std::filesystem;

std::string read_latest(const std::string& ckpt_dir) {
  std::ifstream in(ckpt_dir + "/latest");
  std::string line;
  std::getline(in, line);
  return line;
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

std::optional<double> first_step_after(const std::string& run_dir, double t) {
  const std::string path = run_dir + "/steps.rank0.jsonl";
  if (!fs::exists(path)) return std::nullopt;
  std::optional<double> first;
  try {
    for (const auto& e : read_step_log(path).steps)
      if (e.written_at > t && (!first || e.written_at < *first)) first = e.written_at;
  } catch (const Error&) {
    return std::nullopt;  // a log being written as it is read: no restart time rather than no launcher
  }
  return first;
}

void move_flight_records(const std::string& run_dir, const std::string& folder) {
  std::vector<fs::path> records;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("flight.rank", 0) == 0 && e.path().extension() == ".json") records.push_back(e.path());
  }
  if (records.empty()) return;
  fs::create_directories(fs::path(run_dir) / folder);
  for (const auto& r : records) fs::rename(r, fs::path(run_dir) / folder / r.filename());
}

std::string last_message(const std::string& output) {
  static const std::regex dashes("^-{20,}$");
  std::istringstream in(output);
  std::string line, last;
  bool banner = false;
  while (std::getline(in, line)) {
    if (std::regex_match(line, dashes)) {
      banner = !banner;
      continue;
    }
    if (banner || line.rfind("Run with --help", 0) == 0 || line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = line;
  }
  return last;
}

}  // namespace shardtrain::launch::detail
