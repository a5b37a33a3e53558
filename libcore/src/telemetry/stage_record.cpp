#include "shardtrain/telemetry/stage_record.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
using nlohmann::json;

std::string to_json_line(const StageRecord& r) {
  StageRecord written = r;
  written.recorded_wall_s = r.wall_s();
  return json_fields::write(written).dump();
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
    const std::string where = file + ":" + std::to_string(line_number);
    StageRecord r = json_fields::read<StageRecord>(JsonFile::parse(line, where, "stage record"), "");
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace shardtrain
