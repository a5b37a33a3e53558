// What the comm engine tests share (test_comm_engine*.cpp): options for a fake-transport group,
// the short-timeout options of the failure cases, and readers of the flight records they write.
#pragma once
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/comm/transport.hpp"

namespace comm_engine_test {
using namespace shardtrain;
using std::chrono::milliseconds;

inline CommOptions options(const std::string& name, AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kAuto) {
  CommOptions o;
  o.name = name;
  o.timeout = milliseconds(20000);  // generous: a hang fails the case rather than passing it
  o.all_reduce = all_reduce;
  return o;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": missing");
  return nlohmann::json::parse(in);
}

// The group named `name` in a flight record (null when absent).
inline nlohmann::json group_of(const nlohmann::json& record, const std::string& name) {
  for (const auto& g : record["groups"])
    if (g["name"] == name) return g;
  return nullptr;
}

inline std::vector<std::string> group_names(const nlohmann::json& record) {
  std::vector<std::string> names;
  for (const auto& g : record["groups"]) names.push_back(g["name"]);
  return names;
}


// Short timeouts for the failure cases: 200 ms, and little grace before wait() throws.
inline CommOptions failing_options(const std::string& name, const std::string& run_dir) {
  CommOptions o = options(name);
  o.timeout = milliseconds(200);
  o.teardown_grace = milliseconds(20);
  o.run_dir = run_dir;
  return o;
}

}  // namespace comm_engine_test
