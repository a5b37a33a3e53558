// A registered baseline (<registry>/baselines/<name>.json, decision/registry.hpp): a named n-gram
// model of a training selection and its evaluation on the hold-out after the cutoff, which a
// candidate is compared with (`release-gate decide --baseline NAME`). The model's probabilities are
// beside it (model_file, HDF5: releaseeval/evaluation.hpp's write_ngram_file). docs/FORMATS.md
// ("Release registry") lists the fields.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"

namespace shardtrain {

inline constexpr const char* kBaselineFormat = "shardtrain-release-baseline";

struct BaselineRecord {
  std::string name;
  std::string kind = kNgramEvaluation;
  int order = 0;           // 1 unigram, 2 bigram
  std::string model_file;  // file name in baselines/
  std::string created;     // RFC 3339
  std::string code_version;
  CheckpointEvaluation evaluation;
  bool operator==(const BaselineRecord&) const = default;
  // {"format", "name", "kind", "order", "model_file", "created", "code_version", "evaluation"}
  nlohmann::json to_json() const;
  // Throws UsageError naming the file and the field (or a "format" that is not a baseline's).
  static BaselineRecord from_json(const JsonFile& file, const std::string& at = "");
};

}  // namespace shardtrain
