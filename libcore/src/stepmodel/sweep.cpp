#include "shardtrain/stepmodel/sweep.hpp"

namespace shardtrain {

CollectiveOp OpByName::read(const JsonFile& f, const std::string& pointer) const {
  const std::string op = f.string(pointer);
  const auto named = op_named(op);
  if (!named) f.fail("field " + pointer + " '" + op + "' is not a collective (AllReduce, ReduceScatter, ...)");
  return *named;
}

CollectiveSweep read_collective_sweep(const std::string& path, const std::string& what) {
  return json_fields::read<CollectiveSweep>(JsonFile::read(path, what), "");
}

}  // namespace shardtrain
