// One reader of a number in a JSON object, for every file read outside a JsonFile (issue 48: the
// step model, the release policy and utility model, the cost table, the stage records and the
// flight records each had a private reader, and their rules disagreed: one took +inf where
// another refused it, one cast a float of any size).
//
// The rule: the key is present (the optional form: absent or null is "none"), its value is a JSON
// number (an integer or a float), finite, and inside `range`. Anything else is a UsageError that
// names `where` (the file, and the object in it) and the key:
//   "WHERE: 'KEY' is missing"                  "WHERE: 'KEY' is not a number (got VALUE)"
//   "WHERE: 'KEY' is not finite"               "WHERE: 'KEY' is VALUE, not >= MIN" (or "not in [MIN, MAX]")
// (nlohmann's parser never yields inf or nan from text, and a number past double is refused when
// the file is parsed; "not finite" guards values built in memory.)
#pragma once
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace shardtrain {

struct NumberRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  static NumberRange at_least(double lowest) { return {lowest, std::numeric_limits<double>::infinity()}; }
};

// The rule itself, for a value already found: "" when `value` is a finite JSON number inside
// `range`, else what is wrong ("is not a number (got VALUE)", "is not finite", "is VALUE, not ...")
// for the caller to put after the value's name. JsonFile::number applies it too.
std::string number_problem(const nlohmann::json& value, NumberRange range = {});

double json_number(const nlohmann::json& object, const std::string& key, const std::string& where, NumberRange range = {});
std::optional<double> json_optional_number(const nlohmann::json& object, const std::string& key, const std::string& where,
                                           NumberRange range = {});

}  // namespace shardtrain
