// The restart log's one writer and one reader (restart_log.hpp).
#include "shardtrain/launch/restart_log.hpp"

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/json_fields.hpp"

namespace shardtrain::launch {

using nlohmann::json;

std::optional<double> RestartRecord::restart_s() const {
  if (!first_resumed_step_time) return std::nullopt;
  return *first_resumed_step_time - relaunch_time;
}

json RestartLog::to_json() const {
  using json_fields::or_null;
  json restarts_json = json::array();
  for (const auto& r : restarts) {
    json j = {{"attempt", r.attempt},
              {"previous_exit_status", r.previous_exit_status},
              {"failed_rank", or_null(r.failed_rank)},
              {"verdict", r.verdict ? r.verdict->to_json() : json()},
              {"resumed_from", or_null(r.resumed_from)},
              {"relaunch_time", r.relaunch_time},
              {"first_resumed_step_time", or_null(r.first_resumed_step_time)},
              {"restart_s", or_null(r.restart_s())}};
    if (r.world) {
      j["previous_world_size"] = r.world->previous_world_size;
      j["world_size"] = r.world->world_size;
      j["world_size_reason"] = or_null(r.world->reason);
    }
    restarts_json.push_back(j);
  }
  return {{"final_exit_status", final_exit_status},
          {"restarts", restarts_json},
          {"final_verdict", final_verdict ? final_verdict->to_json() : json()},
          {"stop", stop_reason ? json{{"reason", *stop_reason}} : json()}};
}

RestartLog RestartLog::from_json(const JsonFile& f) {
  namespace jf = json_fields;
  using jf::field;
  RestartLog log;
  log.final_exit_status = jf::small_integer(f, "/final_exit_status");
  const std::size_t n = jf::array_size(f, "/restarts");
  for (std::size_t i = 0; i < n; ++i) {
    const std::string at = "/restarts/" + std::to_string(i);
    RestartRecord r;
    r.attempt = jf::small_integer(f, field(at, "attempt"));
    r.previous_exit_status = jf::small_integer(f, field(at, "previous_exit_status"));
    r.failed_rank = jf::null_or(f, field(at, "failed_rank"), jf::small_integer);
    r.verdict = jf::null_or(f, field(at, "verdict"), AttemptVerdict::from_json);
    r.resumed_from = jf::null_or(f, field(at, "resumed_from"), &JsonFile::string);
    r.relaunch_time = f.number(field(at, "relaunch_time"));
    r.first_resumed_step_time = jf::null_or(f, field(at, "first_resumed_step_time"), &JsonFile::number);
    if (f.has(field(at, "world_size"))) {
      WorldChange w;
      w.previous_world_size = jf::small_integer(f, field(at, "previous_world_size"));
      w.world_size = jf::small_integer(f, field(at, "world_size"));
      w.reason = jf::null_or(f, field(at, "world_size_reason"), &JsonFile::string);
      r.world = w;
    }
    log.restarts.push_back(r);
  }
  log.final_verdict = jf::null_or(f, "/final_verdict", AttemptVerdict::from_json);
  if (!f.at("/stop").is_null()) log.stop_reason = f.string("/stop/reason");
  return log;
}

void write_restart_log(const std::string& path, const RestartLog& log) { write_json_file(path, log.to_json()); }

RestartLog read_restart_log(const std::string& path) {
  return RestartLog::from_json(JsonFile::read(path, "the restart log"));
}

}  // namespace shardtrain::launch
