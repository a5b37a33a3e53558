#include "shardtrain/decision/baseline.hpp"

#include "shardtrain/base/json_fields.hpp"

namespace shardtrain {

nlohmann::json BaselineRecord::to_json() const {
  return {{"format", kBaselineFormat}, {"name", name},       {"kind", kind},
          {"order", order},            {"model_file", model_file}, {"created", created},
          {"code_version", code_version}, {"evaluation", evaluation.to_json()}};
}

BaselineRecord BaselineRecord::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_format(f, at, kBaselineFormat, "baseline");
  BaselineRecord b;
  b.name = f.string(field(at, "name"));
  b.kind = f.string(field(at, "kind"));
  b.order = json_fields::small_integer(f, field(at, "order"));
  b.model_file = f.string(field(at, "model_file"));
  b.created = f.string(field(at, "created"));
  b.code_version = f.string(field(at, "code_version"));
  b.evaluation = CheckpointEvaluation::from_json(f, field(at, "evaluation"));
  return b;
}

}  // namespace shardtrain
