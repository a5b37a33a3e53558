#include "shardtrain/telemetry/step_log.hpp"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>

#include <unistd.h>

#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_number.hpp"
#include <cstdlib>

#include "shardtrain/base/host.hpp"

namespace shardtrain {

nlohmann::json StepRecord::to_json(int rank, const RunIdentity& id) const {
  static const std::string this_host = host_name();  // a process does not move between hosts
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j = {{"step", step},     {"rank", rank}, {"time", now}, {"pid", static_cast<long long>(getpid())},
                      {"host", this_host},
                      {"tokens", tokens}, {"loss", loss}, {"lr", lr},    {"grad_norm", grad_norm},
                      {"tokens_per_s", tokens_per_s}, {"mfu", mfu}};
  for (const TimingColumn& column : kTimingColumns) j[column.name] = this->*column.field;
  const nlohmann::json identity = json_fields::write(id);  // named: items() must not outlive its object
  j.update(identity);
  if (extra.is_object()) j.update(extra);
  const nlohmann::json listed = json_fields::write_fields(*this, listed_fields());
  j.update(listed);
  return j;
}

namespace {

// Whether `line` is a JSON object cut short: it parses as far as the end of the input, where the
// parser wanted more (what a rank killed in the middle of a write leaves).
bool is_torn_object(const std::string& line) {
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string::npos || line[first] != '{') return false;
  try {
    const nlohmann::json parsed = nlohmann::json::parse(line);
    return parsed.is_discarded();  // parsed: not torn (a whole value)
  } catch (const nlohmann::json::parse_error& e) {
    return e.byte >= line.size();  // the error is at the end: everything before it was valid
  } catch (const nlohmann::json::exception&) {
    return false;  // out_of_range 406, a number past double (1e400): a whole line, and a bad one
  }
}

// The value of field `name` of step record `j` as T, or nothing when absent; a wrong type is a
// UsageError naming where. `null_ok`: null reads as NaN (non-finite floats are written as null).
template <typename T>
bool read_field(const nlohmann::json& j, const char* name, T& out, const std::string& where, bool null_ok = false) {
  const auto it = j.find(name);
  if (it == j.end()) return false;
  if (null_ok && it->is_null()) {
    out = T(NAN);
    return true;
  }
  const double value = json_number(j, name, where);  // base's one rule: a finite number
  if constexpr (std::is_integral_v<T>) {
    // A count or a pid: a whole number that fits T (a float such as 1e300 would not convert).
    const bool fits = it->is_number_unsigned() ? it->get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<T>::max())
                                               : it->is_number_integer() && it->get<std::int64_t>() >= std::int64_t(std::numeric_limits<T>::min());
    if (!fits) throw UsageError(where + ": '" + name + "' is not a whole number that fits (got " + it->dump() + ")");
    out = it->get<T>();
  } else {
    out = T(value);
  }
  return true;
}

}  // namespace

StepLogContents read_step_log(const std::string& path, Repeats repeats) {
  std::ifstream in(path);
  if (!in) throw IoError(path + ": cannot read the step log (missing file or permission?)");
  StepLogContents contents;
  contents.path = path;
  std::map<std::int64_t, StepLogEntry> by_step;
  std::size_t lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() && is_torn_object(line)) {
      ++contents.torn_lines;
      continue;
    }
    if (!j.is_object()) throw UsageError(where + ": not a JSON object (is this a JSONL step log?)");
    const auto step = j.find("step");
    if (step == j.end() || !step->is_number_integer()) {
      ++contents.other_records;
      continue;
    }
    StepLogEntry e;
    e.line = lineno;
    e.record.step = step->get<std::int64_t>();
    e.record.loss = NAN;
    e.has_loss = read_field(j, "loss", e.record.loss, where, /*null_ok=*/true);
    e.has_tokens = read_field(j, "tokens", e.record.tokens, where);
    read_field(j, "lr", e.record.lr, where, true);
    read_field(j, "grad_norm", e.record.grad_norm, where, true);
    read_field(j, "tokens_per_s", e.record.tokens_per_s, where, true);  // absent in older logs: 0
    read_field(j, "mfu", e.record.mfu, where, true);
    read_field(j, "time", e.written_at, where);
    read_field(j, "pid", e.pid, where);
    if (const auto h = j.find("host"); h != j.end() && h->is_string()) e.host = h->get<std::string>();
    if (const auto id = j.find("checkpoint_id"); id != j.end() && id->is_string()) e.checkpoint_id = id->get<std::string>();
    if (j.contains(std::get<0>(StepRecord::listed_fields()).name))  // parsed again: only lines with peers
      json_fields::read_fields(JsonFile::parse(line, where, "step record"), "", e.record, StepRecord::listed_fields());
    e.has_timings = true;
    for (const TimingColumn& column : kTimingColumns)
      e.has_timings &= read_field(j, column.name, e.record.*column.field, where);
    if (repeats == Repeats::kKeepAll) contents.steps.push_back(std::move(e));
    else by_step[e.record.step] = std::move(e);
  }
  for (auto& [step, entry] : by_step) contents.steps.push_back(std::move(entry));
  return contents;
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
