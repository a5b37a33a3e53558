#include "shardtrain/base/json_fields.hpp"

#include <cmath>
#include <limits>

namespace shardtrain::json_fields {
namespace {

std::int64_t as_integer(const JsonFile& f, const std::string& pointer, const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9.0e15) return std::int64_t(d);
  }
  f.fail("field " + pointer + " is not an integer (got " + v.dump() + ")");
}

}  // namespace

std::int64_t integer(const JsonFile& f, const std::string& pointer) { return as_integer(f, pointer, f.at(pointer)); }

std::uint64_t count(const JsonFile& f, const std::string& pointer) {
  const nlohmann::json& v = f.at(pointer);
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  const std::int64_t i = as_integer(f, pointer, v);
  if (i < 0) f.fail("field " + pointer + " is negative (got " + v.dump() + ")");
  return std::uint64_t(i);
}

int small_integer(const JsonFile& f, const std::string& pointer) {
  const std::int64_t i = integer(f, pointer);
  if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max())
    f.fail("field " + pointer + " is out of range (got " + std::to_string(i) + ")");
  return int(i);
}

bool boolean(const JsonFile& f, const std::string& pointer) {
  const nlohmann::json& v = f.at(pointer);
  if (!v.is_boolean()) f.fail("field " + pointer + " is not true or false (got " + v.dump() + ")");
  return v.get<bool>();
}

std::optional<std::string> nullable_string(const JsonFile& f, const std::string& pointer) {
  if (!f.has(pointer) || f.at(pointer).is_null()) return std::nullopt;
  return f.string(pointer);
}

std::optional<std::int64_t> nullable_integer(const JsonFile& f, const std::string& pointer) {
  if (!f.has(pointer) || f.at(pointer).is_null()) return std::nullopt;
  return integer(f, pointer);
}

std::size_t array_size(const JsonFile& f, const std::string& pointer) {
  const nlohmann::json& v = f.at(pointer);
  if (!v.is_array()) f.fail("field " + pointer + " is not an array (got " + v.dump().substr(0, 80) + ")");
  return v.size();
}

std::vector<std::string> strings(const JsonFile& f, const std::string& pointer) {
  std::vector<std::string> out(array_size(f, pointer));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f.string(field(pointer, std::to_string(i)));
  return out;
}

std::vector<double> numbers(const JsonFile& f, const std::string& pointer) {
  std::vector<double> out(array_size(f, pointer));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f.number(field(pointer, std::to_string(i)));
  return out;
}

std::vector<std::uint64_t> counts(const JsonFile& f, const std::string& pointer) {
  std::vector<std::uint64_t> out(array_size(f, pointer));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = count(f, field(pointer, std::to_string(i)));
  return out;
}

void require_object(const JsonFile& f, const std::string& pointer) {
  if (!f.at(pointer).is_object()) f.fail("field " + pointer + " is not an object (got " + f.at(pointer).dump().substr(0, 80) + ")");
}

void require_format(const JsonFile& f, const std::string& pointer, const std::string& format, const std::string& what) {
  require_object(f, pointer);
  if (f.string(field(pointer, "format")) != format)
    f.fail("field " + field(pointer, "format") + " is not \"" + format + "\": not a " + what);
}

}  // namespace shardtrain::json_fields
