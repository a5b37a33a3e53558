// Element types, one vocabulary for every module that moves typed bytes: collectives (comm),
// flight records and checkpoints (ckpt). Names: float32 float64 int32 int64 uint64 uint8.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace shardtrain {

enum class DType : int { kFloat32 = 0, kFloat64, kInt32, kInt64, kUInt64, kUInt8 };
const char* dtype_name(DType t);
std::size_t dtype_size(DType t);
// The inverse of dtype_name; throws UsageError naming the unknown name.
DType dtype_from_name(const std::string& name);

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return DType::kUInt64;
  else {
    static_assert(std::is_same_v<T, std::uint8_t>, "element types: float, double, int32, int64, uint64 or uint8");
    return DType::kUInt8;
  }
}

}  // namespace shardtrain
