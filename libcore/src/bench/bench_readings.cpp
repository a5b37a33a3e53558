// read_reading (bench_runner.hpp): the numbers a run left in its files. Every failure to find one
// is "nothing", never an exception: a run that did not write a figure is a wrong value in the
// table, not the end of the benchmark.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "shardtrain/bench/bench_runner.hpp"

namespace shardtrain::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<std::string> text_of(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A .jsonl text is the array of its records; anything else one JSON document.
std::optional<json> json_of(const std::string& path, const std::string& text) {
  try {
    if (path.size() < 6 || path.substr(path.size() - 6) != ".jsonl") return json::parse(text);
    json records = json::array();
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) records.push_back(json::parse(line));
    return records;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

const json* at_pointer(const json& doc, const std::string& pointer) {
  try {
    const json::json_pointer p(pointer);
    return doc.contains(p) ? &doc.at(p) : nullptr;
  } catch (const json::exception&) {
    return nullptr;
  }
}

// A number, or every number of an array of numbers (a per-rank list).
void take_numbers(const json* node, std::vector<double>& out) {
  if (!node) return;
  if (node->is_number()) out.push_back(node->get<double>());
  if (node->is_array())
    for (const auto& e : *node)
      if (e.is_number()) out.push_back(e.get<double>());
}

std::vector<double> json_numbers(const Reading& r, const json& doc, const std::map<std::string, double>& row) {
  std::vector<double> out;
  const auto star = r.pointer.find("/*");
  if (star == std::string::npos) {
    take_numbers(at_pointer(doc, r.pointer), out);
    return out;
  }
  const json* all = at_pointer(doc, r.pointer.substr(0, star));
  if (!all || !all->is_structured()) return out;
  const std::string rest = r.pointer.substr(star + 2);
  for (const auto& element : *all) {
    if (r.where) {
      const auto wanted = row.find(r.where->equals);
      const json* have = at_pointer(element, r.where->pointer);
      if (wanted == row.end() || !have || !have->is_number() || have->get<double>() != wanted->second) continue;
    }
    take_numbers(at_pointer(element, rest), out);
  }
  return out;
}

std::vector<double> regex_numbers(const Reading& r, const std::string& text) {
  std::vector<double> out;
  const std::regex re(r.regex);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    if (it->size() < 2) {
      out.push_back(1);  // no group: each match counts one
      continue;
    }
    try {
      out.push_back(std::stod((*it)[1].str()));
    } catch (const std::exception&) {
      // a group that is not a number is not a value
    }
  }
  return out;
}

std::optional<double> bytes_under(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  if (fs::is_regular_file(path, ec)) return static_cast<double>(fs::file_size(path, ec));
  double total = 0;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) total += static_cast<double>(it->file_size(ec));
  return total;
}

// Nothing when the file cannot be read (so that a count of matches in a missing log is missing, not 0).
std::optional<std::vector<double>> file_numbers(const Reading& r, const std::string& path,
                                                const std::map<std::string, double>& row, RunFiles& files) {
  if (r.kind == ReadingKind::kRegex) {
    const auto& text = files.text(path);
    if (!text) return std::nullopt;
    return regex_numbers(r, *text);
  }
  const auto& doc = files.document(path);
  if (!doc) return std::nullopt;
  return json_numbers(r, *doc, row);
}

}  // namespace

const std::optional<std::string>& RunFiles::text(const std::string& path) {
  auto it = texts_.find(path);
  if (it == texts_.end()) it = texts_.emplace(path, text_of(path)).first;
  return it->second;
}

const std::optional<json>& RunFiles::document(const std::string& path) {
  auto it = documents_.find(path);
  if (it == documents_.end()) {
    const auto& t = text(path);
    it = documents_.emplace(path, t ? json_of(path, *t) : std::nullopt).first;
  }
  return it->second;
}

std::optional<double> read_reading(const Reading& r, const Places& places, const std::string& run_dir,
                                   std::optional<double> wall_s, const std::map<std::string, double>& row,
                                   RunFiles& files) {
  if (r.kind == ReadingKind::kDerived) return derive(r, row);
  if (r.kind == ReadingKind::kWall) return wall_s ? std::optional<double>(*wall_s * r.scale) : std::nullopt;
  std::string path = expand(r.file, places, "reading " + r.name + " file");
  if (!path.empty() && path[0] != '/') path = run_dir + "/" + path;
  std::optional<double> v;
  if (r.kind == ReadingKind::kBytes) v = bytes_under(path);
  else if (const auto numbers = file_numbers(r, path, row, files)) v = reduce_numbers(*numbers, r.reduce);
  if (v) *v *= r.scale;
  return v;
}

std::optional<double> read_reading(const Reading& r, const Places& places, const std::string& run_dir,
                                   std::optional<double> wall_s, const std::map<std::string, double>& row) {
  RunFiles files;
  return read_reading(r, places, run_dir, wall_s, row, files);
}

}  // namespace shardtrain::bench
