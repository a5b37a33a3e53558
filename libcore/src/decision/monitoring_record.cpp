#include "shardtrain/decision/monitoring_record.hpp"

namespace shardtrain {

void RollbackRecord::validate(const JsonFile& f, const std::string& at) const {
  // Version 1 always put a release back and had no "to_baseline".
  if (to.has_value() == to_baseline.has_value())
    f.fail("fields " + json_fields::field(at, "to") + " and " + json_fields::field(at, "to_baseline") +
           ": exactly one must name what was put back (the other null)");
}

std::string RollbackRecord::to_name() const {
  if (to_baseline) return "baseline " + to_baseline->name;
  return to ? to->record : std::string("nothing");
}

}  // namespace shardtrain
