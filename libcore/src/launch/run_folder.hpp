// What the resilient launcher reads from a run and moves in its run folder between attempts
// (private to the layer): `latest`, an attempt's output, the step log's restart time, the flight
// records of each attempt.
#pragma once
#include <optional>
#include <string>

namespace shardtrain::launch::detail {

// The first line of CKPT_DIR/latest ("" when there is none).
std::string read_latest(const std::string& ckpt_dir);
// The whole file ("" when it cannot be read).
std::string read_whole(const std::string& path);
// The first step record of the rank-0 step log written after `t` (unix s), if any.
std::optional<double> first_step_after(const std::string& run_dir, double t);
// Moves RUN_DIR/flight.rank*.json into RUN_DIR/<folder>/ (kept apart from the next attempt's).
void move_flight_records(const std::string& run_dir, const std::string& folder);
// The command's own last message: the last line outside mpirun's banners (blocks between lines of
// dashes), CLI hints and blank lines.
std::string last_message(const std::string& output);

}  // namespace shardtrain::launch::detail
