#include "shardtrain/base/json_number.hpp"

#include <cmath>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

std::string shortest(double v) {
  nlohmann::json j = v;
  return j.dump();
}

double checked(const nlohmann::json& v, const std::string& key, const std::string& where, NumberRange range) {
  if (const std::string problem = number_problem(v, range); !problem.empty())
    throw UsageError(where + ": '" + key + "' " + problem);
  return v.get<double>();
}

}  // namespace

std::string number_problem(const nlohmann::json& v, NumberRange range) {
  if (!v.is_number()) return "is not a number (got " + v.dump() + ")";
  const double d = v.get<double>();
  if (!std::isfinite(d)) return "is not finite";
  if (d >= range.min && d <= range.max) return "";
  const bool upper = range.max != std::numeric_limits<double>::infinity();
  return "is " + shortest(d) + ", not " +
         (upper ? "in [" + shortest(range.min) + ", " + shortest(range.max) + "]" : ">= " + shortest(range.min));
}

double json_number(const nlohmann::json& object, const std::string& key, const std::string& where, NumberRange range) {
  if (!object.is_object() || !object.contains(key)) throw UsageError(where + ": '" + key + "' is missing");
  return checked(object.at(key), key, where, range);
}

std::optional<double> json_optional_number(const nlohmann::json& object, const std::string& key, const std::string& where,
                                           NumberRange range) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) return std::nullopt;
  return checked(object.at(key), key, where, range);
}

}  // namespace shardtrain
