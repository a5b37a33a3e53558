#include "shardtrain/base/json_record.hpp"

namespace shardtrain::json_fields {

double In::read(const JsonFile& f, const std::string& pointer) const {
  const nlohmann::json& v = f.at(pointer);
  if (const std::string problem = number_problem(v, range); !problem.empty()) f.fail("field " + pointer + " " + problem);
  return v.get<double>();
}

std::int64_t WholeIn::read(const JsonFile& f, const std::string& pointer) const {
  const std::int64_t v = integer(f, pointer);
  if (v < lo || v > hi)
    f.fail("field " + pointer + " is " + std::to_string(v) + ", not in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::string EmptyAsNull::read(const JsonFile& f, const std::string& pointer) const {
  return null_or(f, pointer, &JsonFile::string).value_or("");
}

std::vector<int> ranks(const JsonFile& f, const std::string& pointer) {
  std::vector<int> out;
  for (std::uint64_t r : counts(f, pointer)) out.push_back(int(r));
  return out;
}

nlohmann::json object(const JsonFile& f, const std::string& pointer) {
  require_object(f, pointer);
  return f.at(pointer);
}

namespace detail {

int int_key(const JsonFile& f, const std::string& pointer, const std::string& key) {
  const bool digits = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) f.fail("field " + pointer + " has key \"" + key + "\": not a rank (a whole number >= 0)");
  return std::stoi(key);
}

void check_entry(const JsonFile& f, const std::string& at, const FormatTag& e) {
  const std::string pointer = field(at, e.name);
  if (f.string(pointer) != e.value) f.fail("field " + pointer + " is not \"" + e.value + "\": not a " + e.what);
}

void check_entry(const JsonFile& f, const std::string& at, const Version& e) {
  const std::string pointer = field(at, e.name);
  const std::int64_t v = integer(f, pointer);
  if (v != e.number) f.fail("field " + pointer + " is " + std::to_string(v) + ", not " + std::to_string(e.number));
}

}  // namespace detail

std::string choices(const char* const* names, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + std::string(names[i]);
  return out;
}

}  // namespace shardtrain::json_fields
