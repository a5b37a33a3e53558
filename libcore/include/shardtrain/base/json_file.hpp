// JSON files at the edges: the one reader of every JSON file libcore reads (run summaries,
// policies, registry records, step models, evidence, sweeps), with one error rule:
//   * a file that cannot be opened: IoError "PATH: cannot open WHAT (no such file)" (exit 3, as
//     error.hpp has it for every missing file);
//   * text that is not JSON: UsageError "PATH: WHAT is not valid JSON (at byte N: ...)";
//   * a missing field or one of the wrong type: UsageError "PATH: WHAT has no field /a/b" or
//     "PATH: WHAT field /a/b is not a number" (fields are named by their JSON pointer).
// WHAT says what the file was read as ("the --baseline run summary"), so the line tells the user
// which option or file to fix. Writing is durable_file.hpp's write_json_file.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace shardtrain {

class JsonFile {
 public:
  static JsonFile read(const std::string& path, const std::string& what);
  // The same rules for text already in memory (a file read for hashing, an HDF5 attribute).
  static JsonFile parse(const std::string& text, const std::string& path, const std::string& what);

  const nlohmann::json& json() const { return json_; }
  const std::string& path() const { return path_; }
  const std::string& what() const { return what_; }

  // Field access by JSON pointer ("/eval/holdout_loss"). number: any JSON number, finite.
  double number(const std::string& pointer) const;
  std::optional<double> find_number(const std::string& pointer) const;  // absent or null: nothing
  std::string string(const std::string& pointer) const;
  const nlohmann::json& at(const std::string& pointer) const;          // any type, must exist
  bool has(const std::string& pointer) const;

  // A UsageError naming this file, for a rule of the caller's ("PATH: WHAT " + problem).
  [[noreturn]] void fail(const std::string& problem) const;

 private:
  JsonFile(nlohmann::json j, std::string path, std::string what)
      : json_(std::move(j)), path_(std::move(path)), what_(std::move(what)) {}
  nlohmann::json json_;
  std::string path_, what_;
};

}  // namespace shardtrain
