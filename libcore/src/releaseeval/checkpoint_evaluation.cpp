#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"

#include "shardtrain/base/json_record.hpp"

namespace shardtrain {

bool HoldoutIdentity::same_positions(const HoldoutIdentity& other) const {
  HoldoutIdentity a = *this;
  a.data = other.data;
  return a == other;
}

std::string CheckpointEvaluation::read_kind(const JsonFile& f, const std::string& pointer) {
  const std::string kind = f.string(pointer);
  if (kind != kCheckpointEvaluation && kind != kNgramEvaluation)
    f.fail("field " + pointer + " is '" + kind + "', neither \"checkpoint\" nor \"ngram\"");
  return kind;
}

nlohmann::json CheckpointEvaluation::to_json() const {
  nlohmann::json j = json_fields::write_fields(*this, common_fields());
  j.update(is_checkpoint() ? json_fields::write_fields(*this, checkpoint_fields()) : json_fields::write_fields(*this, ngram_fields()));
  return j;
}

CheckpointEvaluation CheckpointEvaluation::from_json(const JsonFile& f, const std::string& at) {
  CheckpointEvaluation e;
  json_fields::read_fields(f, at, e, common_fields());
  if (e.is_checkpoint()) json_fields::read_fields(f, at, e, checkpoint_fields());
  else json_fields::read_fields(f, at, e, ngram_fields());
  return e;
}

}  // namespace shardtrain
