#include "shardtrain/base/json_file.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_number.hpp"

namespace shardtrain {

JsonFile JsonFile::read(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw IoError(path + ": cannot open " + what + " (no such file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open " + what + " (permission? a folder?)");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError(path + ": reading " + what + " failed");
  return parse(text, path, what);
}

JsonFile JsonFile::parse(const std::string& text, const std::string& path, const std::string& what) {
  try {
    return JsonFile(nlohmann::json::parse(text), path, what);
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(path + ": " + what + " is not valid JSON (at byte " + std::to_string(e.byte) + ": " + e.what() + ")");
  } catch (const nlohmann::json::exception& e) {  // out_of_range 406: a number past double's range (1e400)
    throw UsageError(path + ": " + what + " is not valid JSON (" + e.what() + ")");
  }
}

void JsonFile::fail(const std::string& problem) const { throw UsageError(path_ + ": " + what_ + " " + problem); }

bool JsonFile::has(const std::string& pointer) const {
  try {
    return json_.contains(nlohmann::json::json_pointer(pointer));
  } catch (const nlohmann::json::exception&) {
    return false;  // a pointer through a non-object
  }
}

const nlohmann::json& JsonFile::at(const std::string& pointer) const {
  if (!has(pointer)) fail("has no field " + pointer);
  return json_.at(nlohmann::json::json_pointer(pointer));
}

double JsonFile::number(const std::string& pointer) const {
  const nlohmann::json& v = at(pointer);
  if (const std::string problem = number_problem(v); !problem.empty()) fail("field " + pointer + " " + problem);
  return v.get<double>();
}

std::optional<double> JsonFile::find_number(const std::string& pointer) const {
  if (!has(pointer) || at(pointer).is_null()) return std::nullopt;
  return number(pointer);
}

std::string JsonFile::string(const std::string& pointer) const {
  const nlohmann::json& v = at(pointer);
  if (!v.is_string()) fail("field " + pointer + " is not a string (got " + v.dump() + ")");
  return v.get<std::string>();
}

}  // namespace shardtrain
