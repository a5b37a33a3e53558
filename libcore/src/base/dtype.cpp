#include "shardtrain/base/dtype.hpp"

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {
constexpr DType kAll[] = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt64, DType::kUInt8};
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt64: return "uint64";
    case DType::kUInt8: return "uint8";
  }
  return "unknown";
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt64: return 8;
    case DType::kUInt8: return 1;
  }
  return 1;
}

DType dtype_from_name(const std::string& name) {
  for (DType t : kAll)
    if (name == dtype_name(t)) return t;
  throw UsageError("unknown element type '" + name + "' (expected float32, float64, int32, int64, uint64 or uint8)");
}

}  // namespace shardtrain
