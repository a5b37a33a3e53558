// The release registry: a folder of release records, named baselines and the `last-known-good`
// pointer. Layout (docs/FORMATS.md "Release registry"):
//
//   <registry>/records/<YYYYMMDDTHHMMSS.ffffffZ>-<manifest sha256, 12>-<pid>.json   one record each
//   <registry>/baselines/<name>.json        a named baseline: its evaluation (and model file name)
//   <registry>/baselines/<name>.h5          the baseline's model (an n-gram's probabilities)
//   <registry>/monitoring/<stamp>-<sha, 12>-<pid>.json   a monitoring record (monitoring_record.hpp)
//   <registry>/rollbacks/<stamp>-<sha, 12>-<pid>.json    a rollback record (the sha: the release put back)
//   <registry>/reviews/<stamp>-<sha, 12>-<pid>.json      a review sign-off (the sha: of the reviewed path)
//   <registry>/last-known-good              JSON {"format_version": 2, "record": "records/<...>.json",
//                                           "checkpoint", "manifest_sha256", "promoted", "rollback",
//                                           "baseline"}: what is in service ("rollback": the
//                                           rollback record that put it back, null after a
//                                           promotion). A rollback with no previous known-good puts
//                                           a registered baseline in service: "baseline" names it
//                                           (monitoring_record.hpp ServedBaseline) and "record",
//                                           "checkpoint", "manifest_sha256" are null.
//
// Every file is written with durable_file.hpp's rule (temporary + fsync + rename + folder fsync),
// and a record is always committed before the pointer that names it (a rollback: the monitoring
// record, then the rollback record, then the pointer), so a process killed at any point leaves
// every record whole and the pointer naming a record that exists. Readers ignore
// temporaries ("*.tmp"). One writer at a time (release-gate decide in a pipeline); two concurrent
// promotions would each be whole, the later rename winning.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/decision/baseline.hpp"
#include "shardtrain/decision/monitoring_record.hpp"
#include "shardtrain/decision/record.hpp"

namespace shardtrain {

// 2: "baseline" (a baseline in service; "record", "checkpoint", "manifest_sha256" then null) and
// "format_version" itself. A pointer without "format_version" is 1: a release, read as before.
inline constexpr int kLastKnownGoodVersion = 2;

// The `last-known-good` pointer file: a release in service (record, checkpoint, manifest_sha256),
// or a registered baseline (baseline). Exactly one of the two.
struct LastKnownGood {
  std::optional<std::string> record;  // "records/<...>.json", relative to the registry
  std::optional<std::string> checkpoint, manifest_sha256;
  std::string promoted;  // RFC 3339: when the pointer moved here
  std::optional<std::string> rollback;  // "rollbacks/<...>.json" when a rollback moved it here
  std::optional<ServedBaseline> baseline;  // a baseline in service (only ever put there by a rollback)
  int format_version = kLastKnownGoodVersion;  // absent (1, a release in service) reads as this
  bool operator==(const LastKnownGood&) const = default;
  // "record", "checkpoint" and "manifest_sha256" null when a baseline is in service; "rollback" and
  // "baseline" absent in pointers before them (none).
  static auto fields() {
    using namespace json_fields;
    using P = LastKnownGood;
    return std::tuple{key("format_version", &P::format_version, versions(1, kLastKnownGoodVersion), kMayBeAbsent),
                      key("promoted", &P::promoted), key("rollback", &P::rollback, kMayBeAbsent),
                      key("baseline", &P::baseline, kMayBeAbsent), key("record", &P::record),
                      key("checkpoint", &P::checkpoint), key("manifest_sha256", &P::manifest_sha256)};
  }
  // Exactly one of a release (record, checkpoint, manifest_sha256) and a baseline; a baseline only
  // with the rollback that put it there.
  void validate(const JsonFile& f, const std::string& at) const;
  nlohmann::json to_json() const { return json_fields::write(*this); }
  // UsageError naming the file and the field: a version above kLastKnownGoodVersion, or not
  // exactly one of "record" and "baseline".
  static LastKnownGood from_json(const JsonFile& f, const std::string& at = "") { return json_fields::read<LastKnownGood>(f, at); }
};

// What is in service now: the pointer, and the release record or the registered baseline it names.
struct ServiceState {
  LastKnownGood pointer;
  std::optional<ReleaseRecord> release;    // record_path set
  std::optional<BaselineRecord> baseline;  // its registered record (evaluation, model file)
};

class ReleaseRegistry {
 public:
  // Creates the folders when missing (unless read_only). Throws IoError naming the folder.
  explicit ReleaseRegistry(std::string dir, bool read_only = false);
  const std::string& dir() const { return dir_; }

  // What `last-known-good` says is in service; nullopt when there is no pointer. Throws IoError
  // when the pointer names a record that does not exist (never left by this code) or a baseline
  // whose files are gone or whose model file's sha256 is no longer the pointer's (registered
  // again under that name since), UsageError naming the file and the field for a file that is
  // not what it should be.
  std::optional<ServiceState> in_service() const;
  // The release in service (in_service()'s record); nullopt when there is none, or when a baseline
  // is in service.
  std::optional<ReleaseRecord> last_known_good() const;
  // The pointer as it is, unchecked (history prints it even when what it names is gone).
  std::optional<LastKnownGood> pointer() const;
  // A named baseline; throws UsageError listing the registered names when unknown.
  BaselineRecord baseline(const std::string& name) const;
  std::vector<std::string> baseline_names() const;
  // baselines/<name><extension>; names are [A-Za-z0-9._-]+ and not "last-known-good".
  std::string baseline_path(const std::string& name, const std::string& extension) const;
  // Writes baselines/<baseline.name>.json atomically.
  void write_baseline(const BaselineRecord& baseline) const;
  // A registered baseline as a rollback puts it in service: its files and its model file's sha256.
  // UsageError listing the registered names when unknown; IoError when its model file is gone.
  ServedBaseline served_baseline(const std::string& name) const;

  // Commits a record (named by its artifact's manifest sha256); returns its path relative to the
  // registry ("records/<name>.json").
  std::string write_record(const ReleaseRecord& record) const;
  // Moves `last-known-good` to a committed record (atomic replace).
  void promote(const std::string& record_path, const ReleaseRecord& record) const;
  // Every record, oldest first (by file name), with record_path set.
  std::vector<ReleaseRecord> history() const;
  // One record by its path relative to the registry; UsageError naming it when it is not there.
  ReleaseRecord record(const std::string& record_path) const;

  // Commits a monitoring record (named by the monitored release's manifest sha256); returns
  // "monitoring/<name>.json".
  std::string write_monitoring(const MonitoringRecord& record) const;
  // Commits a rollback record (named by what it puts back: the release's manifest sha256 or the
  // baseline's model sha256); returns "rollbacks/<name>.json".
  std::string write_rollback(const RollbackRecord& rollback) const;
  // Moves `last-known-good` to rollback.to (or rollback.to_baseline) after checking that the
  // rollback record is committed and that what it puts back is there (a baseline: its model file
  // still of the recorded sha256).
  void roll_back(const std::string& rollback_path, const RollbackRecord& rollback) const;
  // Every monitoring / rollback record, oldest first, with record_path set.
  std::vector<MonitoringRecord> monitoring() const;
  std::vector<RollbackRecord> rollbacks() const;

  // Signs off a decision that needed review: `review.record` must be a release record of a
  // promotion or a rollback record whose review is required, not yet signed off; UsageError naming
  // it otherwise. Commits reviews/<...>.json; returns its path.
  std::string sign_off(const ReviewSignOff& review) const;
  std::vector<ReviewSignOff> reviews() const;
  // Whether a review of `record_path` has been signed off.
  bool signed_off(const std::string& record_path) const;

 private:
  std::string dir_;
};

}  // namespace shardtrain
