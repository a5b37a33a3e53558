#include "shardtrain/report/telemetry.hpp"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <chrono>
#include <cstdio>

#include <unistd.h>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain {

nlohmann::json RunIdentity::to_json() const {
  return {{"config_hash", config_hash},
          {"data_snapshot_id", data_snapshot_id},
          {"code_version", code_version},
          {"checkpoint_id", checkpoint_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(checkpoint_id)}};
}

nlohmann::json StepRecord::to_json(int rank, const RunIdentity& id) const {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j = {{"step", step},     {"rank", rank}, {"time", now}, {"pid", static_cast<long long>(getpid())},
                      {"tokens", tokens}, {"loss", loss}, {"lr", lr},    {"grad_norm", grad_norm}};
  for (const TimingColumn& column : kTimingColumns) j[column.name] = this->*column.field;
  const nlohmann::json identity = id.to_json();  // named: items() must not outlive its object
  j.update(identity);
  if (extra.is_object()) j.update(extra);
  return j;
}

StepLog::StepLog(const std::string& path, int rank, RunIdentity identity)
    : path_(path), rank_(rank), identity_(std::move(identity)) {
  out_.open(path, std::ios::out | std::ios::app);
  if (!out_) throw IoError(path + ": cannot open the step log for writing (missing folder or permission?)");
}

void StepLog::append(const StepRecord& record) {
  out_ << record.to_json(rank_, identity_).dump() << '\n';
  out_.flush();
  if (!out_) throw IoError(path_ + ": writing the step log failed (disk full?)");
}

SeriesStats SeriesStats::of(std::vector<double> v) {
  SeriesStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  const std::size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

nlohmann::json SeriesStats::to_json() const { return {{"min", min}, {"median", median}, {"max", max}}; }

std::map<int, std::string> find_step_logs(const std::string& run_dir) {
  namespace fs = std::filesystem;
  static const std::regex kName(R"(steps\.rank(\d+)\.jsonl)");
  std::map<int, std::string> logs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, kName)) logs[std::stoi(m[1].str())] = entry.path().string();
  }
  if (ec) throw IoError(run_dir + ": cannot list the run folder (" + ec.message() + ")");
  return logs;
}

}  // namespace shardtrain
