#include "shardtrain/release/registry.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/time.hpp"

namespace shardtrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPointer = "last-known-good";

nlohmann::json read_json(const fs::path& path) {
  return JsonFile::read(path.string(), "the release registry's file (edited by hand?)").json();
}

// "20261201T101500.123456Z" (UTC, microseconds) for a file name that sorts by time.
std::string compact_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32], out[48];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", &tm);
  std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(micros));
  return out;
}

}  // namespace

ReleaseRegistry::ReleaseRegistry(std::string dir, bool read_only) : dir_(std::move(dir)) {
  if (read_only) {
    if (!fs::is_directory(dir_)) throw UsageError(dir_ + ": no release registry here (--registry)");
    return;
  }
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "records", ec);
  if (!ec) fs::create_directories(fs::path(dir_) / "baselines", ec);
  if (ec) throw IoError(dir_ + ": cannot create the release registry (" + ec.message() + ")");
}

std::optional<nlohmann::json> ReleaseRegistry::last_known_good() const {
  const fs::path pointer = fs::path(dir_) / kPointer;
  if (!fs::exists(pointer)) return std::nullopt;
  const nlohmann::json p = read_json(pointer);
  const std::string record = p.value("record", "");
  if (record.empty() || !fs::exists(fs::path(dir_) / record))
    throw IoError(pointer.string() + " names record '" + record + "', which does not exist");
  nlohmann::json r = read_json(fs::path(dir_) / record);
  r["record_path"] = record;
  return r;
}

std::string ReleaseRegistry::baseline_path(const std::string& name, const std::string& extension) const {
  const bool ok = !name.empty() && name != kPointer && name[0] != '.' &&
                  std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-'; });
  if (!ok) throw UsageError("baseline name '" + name + "': use letters, digits, '.', '_' and '-' (not last-known-good)");
  return (fs::path(dir_) / "baselines" / (name + extension)).string();
}

std::vector<std::string> ReleaseRegistry::baseline_names() const {
  std::vector<std::string> names;
  const fs::path folder = fs::path(dir_) / "baselines";
  if (fs::is_directory(folder))
    for (const auto& e : fs::directory_iterator(folder))
      if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json ReleaseRegistry::baseline(const std::string& name) const {
  const std::string path = baseline_path(name, ".json");
  if (!fs::exists(path)) {
    std::string known;
    for (const auto& n : baseline_names()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("no baseline '" + name + "' in " + dir_ + " (registered: " + (known.empty() ? "none" : known) +
                     "); register one with release-gate baseline, or use last-known-good");
  }
  return read_json(path);
}

void ReleaseRegistry::write_baseline(const std::string& name, const nlohmann::json& baseline) const {
  write_json_file(baseline_path(name, ".json"), baseline);
}

std::string ReleaseRegistry::write_record(const nlohmann::json& record, const std::string& manifest_sha256) const {
  const std::string name = "records/" + compact_now() + "-" + manifest_sha256.substr(0, 12) + "-" +
                           std::to_string(::getpid()) + ".json";
  write_json_file((fs::path(dir_) / name).string(), record);
  return name;
}

void ReleaseRegistry::promote(const std::string& record_path, const nlohmann::json& record) const {
  if (!fs::exists(fs::path(dir_) / record_path)) throw IoError(dir_ + "/" + record_path + ": promote needs a committed record");
  const nlohmann::json pointer = {{"record", record_path},
                                  {"checkpoint", record["artifact"]["folder"]},
                                  {"manifest_sha256", record["artifact"]["manifest_sha256"]},
                                  {"promoted", now_rfc3339()}};
  write_json_file((fs::path(dir_) / kPointer).string(), pointer);
}

std::vector<nlohmann::json> ReleaseRegistry::history() const {
  std::vector<std::string> names;
  const fs::path folder = fs::path(dir_) / "records";
  if (fs::is_directory(folder))
    for (const auto& e : fs::directory_iterator(folder))
      if (e.path().extension() == ".json") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::vector<nlohmann::json> records;
  for (const auto& n : names) {
    nlohmann::json r = read_json(folder / n);
    r["record_path"] = "records/" + n;
    records.push_back(r);
  }
  return records;
}

}  // namespace shardtrain
