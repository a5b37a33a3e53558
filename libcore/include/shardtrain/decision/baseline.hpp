// A registered baseline (<registry>/baselines/<name>.json, decision/registry.hpp): a named n-gram
// model of a training selection and its evaluation on the hold-out after the cutoff, which a
// candidate is compared with (`release-gate decide --baseline NAME`). The model's probabilities are
// beside it (model_file, HDF5: releaseeval/evaluation.hpp's write_ngram_file). docs/FORMATS.md
// ("Release registry") lists the fields.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
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
  static auto fields() {
    using namespace json_fields;
    using B = BaselineRecord;
    return std::tuple{format_tag("format", kBaselineFormat, "baseline"), key("name", &B::name), key("kind", &B::kind),
                      key("order", &B::order), key("model_file", &B::model_file), key("created", &B::created),
                      key("code_version", &B::code_version), key("evaluation", &B::evaluation)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  // Throws UsageError naming the file and the field (or a "format" that is not a baseline's).
  static BaselineRecord from_json(const JsonFile& f, const std::string& at = "") { return json_fields::read<BaselineRecord>(f, at); }
};

}  // namespace shardtrain
