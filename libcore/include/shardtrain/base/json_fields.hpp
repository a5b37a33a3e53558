// Typed field reads for from_json functions, on top of base/json_file.hpp's
// JsonFile: every failure names the file, what it was read as and the field by its JSON pointer
// ("REG/records/X.json: the release record has no field /scores/candidate/holdout/cutoff"), so a
// hand-edited or truncated record says what to fix. `at` is the pointer of the object being read
// ("" for the document itself); field(at, key) joins them.
#pragma once
#include <cstdint>
#include <functional>
#include <type_traits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"

namespace shardtrain::json_fields {

inline std::string field(const std::string& at, const std::string& key) { return at + "/" + key; }

// Integers: a JSON integer, or a float with an integral value (a hand-written 2.0).
std::int64_t integer(const JsonFile& f, const std::string& pointer);
std::uint64_t count(const JsonFile& f, const std::string& pointer);  // >= 0
int small_integer(const JsonFile& f, const std::string& pointer);     // fits an int
bool boolean(const JsonFile& f, const std::string& pointer);
// Absent or null: nothing; anything else must be of the type.
std::optional<std::string> nullable_string(const JsonFile& f, const std::string& pointer);
std::optional<std::int64_t> nullable_integer(const JsonFile& f, const std::string& pointer);
// A field that must be present and may be null (a summary's "eval": null where there is no
// hold-out): nothing for null, else read(f, pointer). A missing one is refused by name. `read` is
// any reader of this file's shape: a JsonFile member (&JsonFile::number), a function above
// (json_fields::small_integer) or a from_json (AttemptVerdict::from_json).
template <typename Read>
auto null_or(const JsonFile& f, const std::string& pointer, Read read)
    -> std::optional<std::decay_t<std::invoke_result_t<Read, const JsonFile&, const std::string&>>> {
  if (f.at(pointer).is_null()) return std::nullopt;
  return std::invoke(read, f, pointer);
}
// The field must be an array; returns its length (elements are read by field(pointer, index)).
std::size_t array_size(const JsonFile& f, const std::string& pointer);
std::vector<std::string> strings(const JsonFile& f, const std::string& pointer);
std::vector<double> numbers(const JsonFile& f, const std::string& pointer);
std::vector<std::uint64_t> counts(const JsonFile& f, const std::string& pointer);
// The field must be an object.
void require_object(const JsonFile& f, const std::string& pointer);
// The object at `pointer` must have "format": `format`; else "... is not \"FORMAT\": not a WHAT".
void require_format(const JsonFile& f, const std::string& pointer, const std::string& format, const std::string& what);

// An array of objects, each read by T::from_json(f, pointer + "/" + index).
template <typename T>
std::vector<T> objects(const JsonFile& f, const std::string& pointer) {
  std::vector<T> out;
  for (std::size_t i = 0, n = array_size(f, pointer); i < n; ++i) out.push_back(T::from_json(f, field(pointer, std::to_string(i))));
  return out;
}

// Writing: each value's to_json() in a JSON array.
template <typename T>
nlohmann::json array_of(const std::vector<T>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : values) out.push_back(v.to_json());
  return out;
}

// Writing: an optional value as itself, or JSON null when there is none.
template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace shardtrain::json_fields
