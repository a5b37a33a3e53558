#include "shardtrain/telemetry/stage_record.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_number.hpp"

namespace shardtrain {
namespace {

using nlohmann::json;

int whole_number(const json& j, const char* key, int fallback, int lowest, int highest, const std::string& where) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < lowest || v.get<std::int64_t>() > highest)
    throw UsageError(where + ": '" + key + "' is not an integer in [" + std::to_string(lowest) + ", " +
                     std::to_string(highest) + "] (got " + v.dump() + ")");
  return int(v.get<std::int64_t>());
}

std::string text_or_null(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return "";
  if (!j.at(key).is_string()) throw UsageError(where + ": '" + key + "' is not a string (got " + j.at(key).dump() + ")");
  return j.at(key).get<std::string>();
}

}  // namespace

std::string to_json_line(const StageRecord& r) {
  const json j = {{"stage", r.stage},       {"ranks", r.ranks},
                  {"start", r.start},       {"end", r.end},
                  {"wall_s", r.wall_s()},   {"exit_status", r.exit_status},
                  {"job_id", r.job_id.empty() ? json() : json(r.job_id)}};
  return j.dump();
}

void append_stage_record(const std::string& file, const StageRecord& r) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
  std::ofstream out(file, std::ios::app);
  out << to_json_line(r) << '\n';
  if (!out.flush()) throw IoError(file + ": cannot append the stage record");
}

std::vector<StageRecord> read_stage_records(const std::string& file) {
  std::vector<StageRecord> records;
  std::ifstream in(file);
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;  // torn by a killed stage
    const std::string where = file + ":" + std::to_string(line_number) + ": stage record";
    StageRecord r;
    if (!j.contains("stage") || !j.at("stage").is_string())
      throw UsageError(where + ": 'stage' is " + (j.contains("stage") ? "not a string (got " + j.at("stage").dump() + ")" : "missing"));
    r.stage = j.at("stage").get<std::string>();
    r.ranks = whole_number(j, "ranks", 1, 1, 1 << 24, where);
    r.exit_status = whole_number(j, "exit_status", 1, -255, 255, where);
    r.start = json_optional_number(j, "start", where).value_or(0);
    r.end = json_optional_number(j, "end", where).value_or(0);
    r.recorded_wall_s = json_optional_number(j, "wall_s", where, NumberRange::at_least(0));
    r.job_id = text_or_null(j, "job_id", where);
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace shardtrain
