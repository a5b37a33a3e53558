// The release registry: a folder of release records, named baselines and the `last-known-good`
// pointer. Layout (docs/FORMATS.md "Release registry"):
//
//   <registry>/records/<YYYYMMDDTHHMMSS.ffffffZ>-<manifest sha256, 12>-<pid>.json   one record each
//   <registry>/baselines/<name>.json        a named baseline: its evaluation (and model file name)
//   <registry>/baselines/<name>.h5          the baseline's model (an n-gram's probabilities)
//   <registry>/last-known-good              JSON {"record": "records/<...>.json", "checkpoint",
//                                           "manifest_sha256", "promoted"}: the release in service
//
// Every file is written with durable_file.hpp's rule (temporary + fsync + rename + folder fsync),
// and a record is always committed before the pointer that names it, so a process killed at any
// point leaves every record whole and the pointer naming a record that exists. Readers ignore
// temporaries ("*.tmp"). One writer at a time (release-gate decide in a pipeline); two concurrent
// promotions would each be whole, the later rename winning.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardtrain {

class ReleaseRegistry {
 public:
  // Creates the folders when missing (unless read_only). Throws IoError naming the folder.
  explicit ReleaseRegistry(std::string dir, bool read_only = false);
  const std::string& dir() const { return dir_; }

  // The record `last-known-good` names, with "record_path" added; nullopt when there is none.
  // Throws IoError when the pointer names a record that does not exist (never left by this code).
  std::optional<nlohmann::json> last_known_good() const;
  // A named baseline's JSON; throws UsageError listing the registered names when unknown.
  nlohmann::json baseline(const std::string& name) const;
  std::vector<std::string> baseline_names() const;
  // Writes baselines/<name>.json atomically; names are [A-Za-z0-9._-]+ and not "last-known-good".
  std::string baseline_path(const std::string& name, const std::string& extension) const;
  void write_baseline(const std::string& name, const nlohmann::json& baseline) const;

  // Commits a record; returns its path relative to the registry ("records/<name>.json").
  std::string write_record(const nlohmann::json& record, const std::string& manifest_sha256) const;
  // Moves `last-known-good` to a committed record (atomic replace).
  void promote(const std::string& record_path, const nlohmann::json& record) const;
  // Every record, oldest first (by file name), with "record_path" added.
  std::vector<nlohmann::json> history() const;

 private:
  std::string dir_;
};

}  // namespace shardtrain
