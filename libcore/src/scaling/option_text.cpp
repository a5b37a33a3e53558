#include "shardtrain/scaling/option_text.hpp"

#include <cmath>
#include <map>
#include <sstream>

#include "shardtrain/base/error.hpp"

namespace shardtrain::scaling {

std::vector<int> parse_workers(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw UsageError(what + " '" + text + "': '" + item + "' is not a whole number");
    if (v < 1 || v > 1 << 20) throw UsageError(what + " '" + text + "': " + item + " workers is not in [1, 1048576]");
    out.push_back(int(v));
  }
  if (out.empty()) throw UsageError(what + " is empty: give worker counts such as 1,2,4,8");
  return out;
}

double parse_bytes(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw UsageError(what + " '" + text + "' is not a byte count (e.g. 8e9, 8GB, 80GiB)");
  }
  std::string unit = text.substr(used);
  static const std::map<std::string, double> units = {
      {"", 1},      {"B", 1},          {"K", 1e3},  {"KB", 1e3},          {"M", 1e6},  {"MB", 1e6},
      {"G", 1e9},   {"GB", 1e9},       {"T", 1e12}, {"TB", 1e12},         {"KiB", 1024.0},
      {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const auto it = units.find(unit);
  if (it == units.end()) throw UsageError(what + " '" + text + "': unknown unit '" + unit + "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  v *= it->second;
  if (!(v > 0) || !std::isfinite(v)) throw UsageError(what + " '" + text + "' must be a positive number of bytes");
  return v;
}

std::vector<Topology> parse_topologies(const std::string& text, const std::string& what) {
  std::vector<Topology> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::size_t x = item.find('x');
    std::vector<int> n;
    if (x != std::string::npos) n = parse_workers(item.substr(0, x) + "," + item.substr(x + 1), what);
    if (n.size() != 2) throw UsageError(what + ": '" + item + "' is not NODESxRANKS_PER_NODE (e.g. 2x2)");
    out.push_back({n[0], n[1]});
  }
  if (out.empty()) throw UsageError(what + ": no topology given (e.g. 2x2,3x1)");
  return out;
}

}  // namespace shardtrain::scaling
