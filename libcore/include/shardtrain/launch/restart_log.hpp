// The resilient launcher's restart log (RUN_DIR/restarts.json by default; docs/FORMATS.md "Restart
// log", format unchanged from the shell launcher's): one typed record per restart, the final exit
// status, the last attempt's verdict and why the launcher stopped. One writer (write_restart_log,
// atomic) and one reader (read_restart_log), both walking the types' fields() lists below.
//
//   {"final_exit_status": int,
//    "restarts": [{"attempt", "previous_exit_status", "failed_rank" (int|null), "verdict" (object|null,
//                  attempt_verdict.hpp), "resumed_from" (checkpoint path|null), "relaunch_time" (unix s),
//                  "first_resumed_step_time" (unix s|null), "restart_s" (s|null),
//                  and with elastic restarts "previous_world_size", "world_size",
//                  "world_size_reason" (string|null)}],
//    "final_verdict": object|null (the last attempt's, when it failed with a status other than 2),
//    "stop": {"reason": string}|null}
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/launch/attempt_verdict.hpp"

namespace shardtrain::launch {

struct WorldChange {
  int previous_world_size = 0, world_size = 0;
  std::optional<std::string> reason;  // null: unchanged
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("previous_world_size", &WorldChange::previous_world_size),
                      key("world_size", &WorldChange::world_size), key("world_size_reason", &WorldChange::reason)};
  }
  bool operator==(const WorldChange&) const = default;
};

struct RestartRecord {
  int attempt = 0;                  // the attempt this restart launched (1, 2, ...)
  int previous_exit_status = 0;
  std::optional<int> failed_rank;   // the previous attempt's counted culprit
  std::optional<AttemptVerdict> verdict;
  std::optional<std::string> resumed_from;  // what `latest` named at the relaunch
  double relaunch_time = 0;                 // unix s
  std::optional<double> first_resumed_step_time;  // the first step record written after relaunch
  std::optional<WorldChange> world;         // elastic restarts only
  std::optional<double> restart_s() const;  // first step - relaunch
  static auto fields() {
    using namespace json_fields;
    using R = RestartRecord;
    return std::tuple{key("attempt", &R::attempt), key("previous_exit_status", &R::previous_exit_status),
                      key("failed_rank", &R::failed_rank), key("verdict", &R::verdict), key("resumed_from", &R::resumed_from),
                      key("relaunch_time", &R::relaunch_time), key("first_resumed_step_time", &R::first_resumed_step_time),
                      written("restart_s", &R::restart_s), inlined(&R::world)};
  }
  bool operator==(const RestartRecord&) const = default;
};

struct RestartLog {
  int final_exit_status = 0;
  std::vector<RestartRecord> restarts;
  std::optional<AttemptVerdict> final_verdict;
  std::optional<std::string> stop_reason;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("final_exit_status", &RestartLog::final_exit_status), key("restarts", &RestartLog::restarts),
                      key("final_verdict", &RestartLog::final_verdict),
                      key("stop", &RestartLog::stop_reason, in_object("reason"))};
  }
  bool operator==(const RestartLog&) const = default;
};

void write_restart_log(const std::string& path, const RestartLog& log);
RestartLog read_restart_log(const std::string& path);

}  // namespace shardtrain::launch
