// The restart log's one writer and one reader (restart_log.hpp).
#include "shardtrain/launch/restart_log.hpp"

#include "shardtrain/base/durable_file.hpp"

namespace shardtrain::launch {

std::optional<double> RestartRecord::restart_s() const {
  if (!first_resumed_step_time) return std::nullopt;
  return *first_resumed_step_time - relaunch_time;
}

void write_restart_log(const std::string& path, const RestartLog& log) { write_json_file(path, json_fields::write(log)); }

RestartLog read_restart_log(const std::string& path) {
  return json_fields::read<RestartLog>(JsonFile::read(path, "the restart log"), "");
}

}  // namespace shardtrain::launch
