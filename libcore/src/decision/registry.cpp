#include "shardtrain/decision/registry.hpp"

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
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/sha256.hpp"

namespace shardtrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPointer = "last-known-good";

JsonFile read_file(const fs::path& path, const std::string& what) {
  return JsonFile::read(path.string(), what + " (edited by hand?)");
}

ReleaseRecord read_record(const std::string& dir, const std::string& record_path) {
  ReleaseRecord r = ReleaseRecord::from_json(read_file(fs::path(dir) / record_path, "the release record"));
  r.record_path = record_path;
  return r;
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

// The JSON files of one registry folder ("records", "monitoring", "rollbacks"), oldest first.
std::vector<std::string> names_in(const std::string& dir, const char* sub) {
  std::vector<std::string> names;
  const fs::path folder = fs::path(dir) / sub;
  if (fs::is_directory(folder))
    for (const auto& e : fs::directory_iterator(folder))
      if (e.path().extension() == ".json") names.push_back(std::string(sub) + "/" + e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Commits `value` as <dir>/<sub>/<stamp>-<sha, 12>-<pid>.json, creating the folder durably first.
std::string commit_named(const std::string& dir, const char* sub, const std::string& sha256, const nlohmann::json& value) {
  const fs::path folder = fs::path(dir) / sub;
  if (!fs::is_directory(folder)) {
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) throw IoError(folder.string() + ": cannot create the registry folder (" + ec.message() + ")");
    fsync_path(dir);  // the new folder's entry survives a crash before the file's rename does
  }
  const std::string name = std::string(sub) + "/" + compact_now() + "-" + sha256.substr(0, 12) + "-" +
                           std::to_string(::getpid()) + ".json";
  write_json_file((fs::path(dir) / name).string(), value);
  return name;
}

// SHA-256 of a file's bytes, read in 1 MiB pieces.
std::string file_sha256(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot read the baseline's model file (registered with release-gate baseline?)");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    if (in.gcount() > 0) h.update(buf.data(), std::size_t(in.gcount()));
  }
  if (in.bad()) throw IoError(path.string() + ": read error");
  return to_hex(h.digest());
}

template <typename Record>
std::vector<Record> read_all(const std::string& dir, const char* sub, const std::string& what) {
  std::vector<Record> out;
  for (const auto& name : names_in(dir, sub)) {
    Record r = Record::from_json(read_file(fs::path(dir) / name, what));
    r.record_path = name;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

void LastKnownGood::validate(const JsonFile& f, const std::string& at) const {
  using json_fields::field;
  const std::pair<const char*, const std::optional<std::string>*> release[] = {
      {"record", &record}, {"checkpoint", &checkpoint}, {"manifest_sha256", &manifest_sha256}};
  for (const auto& [key, value] : release) {
    if (!baseline && !*value) f.fail("field " + field(at, key) + " is null, and no baseline is in service");
    if (baseline && *value) f.fail("field " + field(at, key) + " must be null when " + field(at, "baseline") + " names a baseline in service");
  }
  if (baseline && !rollback) f.fail("field " + field(at, "rollback") + ": a baseline is only put in service by a rollback");
}

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

std::optional<LastKnownGood> ReleaseRegistry::pointer() const {
  const fs::path pointer = fs::path(dir_) / kPointer;
  if (!fs::exists(pointer)) return std::nullopt;
  return LastKnownGood::from_json(read_file(pointer, "the last-known-good pointer"));
}

std::optional<ServiceState> ReleaseRegistry::in_service() const {
  const fs::path pointer = fs::path(dir_) / kPointer;
  if (!fs::exists(pointer)) return std::nullopt;
  const JsonFile file = read_file(pointer, "the last-known-good pointer");
  const bool names_baseline = file.has("/baseline") && file.at("/baseline").is_object();
  // A pointer naming no record is the one state a reader must not act on: an IoError, as a missing file.
  const std::string record = file.has("/record") && file.at("/record").is_string() ? file.string("/record") : "";
  if (!names_baseline && (record.empty() || !fs::exists(fs::path(dir_) / record)))
    throw IoError(pointer.string() + " names record '" + record + "', which does not exist");
  ServiceState state;
  state.pointer = LastKnownGood::from_json(file);  // the rest of the pointer must be whole too
  if (!state.pointer.baseline) {
    state.release = read_record(dir_, *state.pointer.record);
    return state;
  }
  const ServedBaseline& b = *state.pointer.baseline;
  if (!fs::exists(fs::path(dir_) / b.file) || !fs::exists(fs::path(dir_) / b.model_file))
    throw IoError(pointer.string() + " names baseline '" + b.name + "', whose files " + b.file + " and " + b.model_file +
                  " are not both there; restore them, or promote a release (release-gate decide)");
  const std::string sha = file_sha256(fs::path(dir_) / b.model_file);
  if (sha != b.sha256)
    throw IoError(pointer.string() + " names baseline '" + b.name + "' with model sha256 " + b.sha256.substr(0, 12) +
                  ", but " + b.model_file + " is now " + sha.substr(0, 12) +
                  " (registered again under that name?); the baseline in service is gone");
  state.baseline = BaselineRecord::from_json(read_file(fs::path(dir_) / b.file, "the registered baseline"));
  return state;
}

std::optional<ReleaseRecord> ReleaseRegistry::last_known_good() const {
  auto state = in_service();
  if (!state || !state->release) return std::nullopt;
  return std::move(state->release);
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

BaselineRecord ReleaseRegistry::baseline(const std::string& name) const {
  const std::string path = baseline_path(name, ".json");
  if (!fs::exists(path)) {
    std::string known;
    for (const auto& n : baseline_names()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("no baseline '" + name + "' in " + dir_ + " (registered: " + (known.empty() ? "none" : known) +
                     "); register one with release-gate baseline, or use last-known-good");
  }
  return BaselineRecord::from_json(read_file(path, "the registered baseline"));
}

void ReleaseRegistry::write_baseline(const BaselineRecord& baseline) const {
  write_json_file(baseline_path(baseline.name, ".json"), baseline.to_json());
}

ServedBaseline ReleaseRegistry::served_baseline(const std::string& name) const {
  const BaselineRecord b = baseline(name);  // names the registered ones when unknown
  ServedBaseline s;
  s.name = name;
  s.file = "baselines/" + fs::path(baseline_path(name, ".json")).filename().string();
  s.model_file = "baselines/" + fs::path(b.model_file).filename().string();
  s.sha256 = file_sha256(fs::path(dir_) / s.model_file);
  return s;
}

std::string ReleaseRegistry::write_record(const ReleaseRecord& record) const {
  return commit_named(dir_, "records", record.artifact.manifest_sha256, record.to_json());
}

void ReleaseRegistry::promote(const std::string& record_path, const ReleaseRecord& record) const {
  if (!fs::exists(fs::path(dir_) / record_path)) throw IoError(dir_ + "/" + record_path + ": promote needs a committed record");
  const LastKnownGood pointer{record_path, record.artifact.folder, record.artifact.manifest_sha256, now_rfc3339(),
                              std::nullopt, std::nullopt};
  write_json_file((fs::path(dir_) / kPointer).string(), pointer.to_json());
}

std::vector<ReleaseRecord> ReleaseRegistry::history() const {
  std::vector<ReleaseRecord> records;
  for (const auto& n : names_in(dir_, "records")) records.push_back(read_record(dir_, n));
  return records;
}

ReleaseRecord ReleaseRegistry::record(const std::string& record_path) const {
  if (record_path.rfind("records/", 0) != 0 || !fs::exists(fs::path(dir_) / record_path))
    throw UsageError(dir_ + ": no release record '" + record_path + "' (give a path like records/<...>.json; "
                     "release-gate history lists them)");
  return read_record(dir_, record_path);
}

std::string ReleaseRegistry::write_monitoring(const MonitoringRecord& record) const {
  return commit_named(dir_, "monitoring", record.release.release.manifest_sha256, record.to_json());
}

std::string ReleaseRegistry::write_rollback(const RollbackRecord& rollback) const {
  if (rollback.to.has_value() == rollback.to_baseline.has_value())
    throw Error(ExitCode::kInternal, "a rollback record must put back exactly one release or baseline");
  return commit_named(dir_, "rollbacks", rollback.to ? rollback.to->manifest_sha256 : rollback.to_baseline->sha256,
                      rollback.to_json());
}

void ReleaseRegistry::roll_back(const std::string& rollback_path, const RollbackRecord& rollback) const {
  if (!fs::exists(fs::path(dir_) / rollback_path))
    throw IoError(dir_ + "/" + rollback_path + ": a rollback needs its committed record");
  LastKnownGood pointer;
  pointer.promoted = now_rfc3339();
  pointer.rollback = rollback_path;
  if (rollback.to_baseline) {
    const ServedBaseline& b = *rollback.to_baseline;
    if (!fs::exists(fs::path(dir_) / b.file) || file_sha256(fs::path(dir_) / b.model_file) != b.sha256)
      throw IoError(dir_ + "/" + b.model_file + ": the rollback's baseline is not the one recorded (gone, or registered again)");
    pointer.baseline = b;
  } else {
    if (!rollback.to || !fs::exists(fs::path(dir_) / rollback.to->record))
      throw IoError(dir_ + "/" + (rollback.to ? rollback.to->record : std::string("?")) +
                    ": the rollback target's record does not exist");
    pointer.record = rollback.to->record;
    pointer.checkpoint = rollback.to->checkpoint;
    pointer.manifest_sha256 = rollback.to->manifest_sha256;
  }
  write_json_file((fs::path(dir_) / kPointer).string(), pointer.to_json());
}

std::vector<MonitoringRecord> ReleaseRegistry::monitoring() const {
  return read_all<MonitoringRecord>(dir_, "monitoring", "the monitoring record");
}

std::vector<RollbackRecord> ReleaseRegistry::rollbacks() const {
  return read_all<RollbackRecord>(dir_, "rollbacks", "the rollback record");
}

std::vector<ReviewSignOff> ReleaseRegistry::reviews() const {
  return read_all<ReviewSignOff>(dir_, "reviews", "the review sign-off");
}

bool ReleaseRegistry::signed_off(const std::string& record_path) const {
  const auto all = reviews();
  return std::any_of(all.begin(), all.end(), [&](const ReviewSignOff& r) { return r.record == record_path; });
}

std::string ReleaseRegistry::sign_off(const ReviewSignOff& review) const {
  const std::string& path = review.record;
  ReviewNeed need;
  if (path.rfind("rollbacks/", 0) == 0 && fs::exists(fs::path(dir_) / path)) {
    need = RollbackRecord::from_json(read_file(fs::path(dir_) / path, "the rollback record")).review;
  } else {
    const ReleaseRecord r = record(path);  // names the path when it is neither
    need = r.review;
  }
  if (!need.required)
    throw UsageError(dir_ + "/" + path + ": this decision needs no review (the policy asked for none)");
  for (const auto& r : reviews())
    if (r.record == path)
      throw UsageError(dir_ + "/" + path + ": already signed off by " + r.by + " at " + r.signed_off + " (" +
                       r.record_path + ")");
  if (review.by.empty()) throw UsageError("--by: name the person who reviewed it");
  const std::string digest = to_hex(sha256(path.data(), path.size()));
  return commit_named(dir_, "reviews", digest, review.to_json());
}

}  // namespace shardtrain
