// A pipeline run's stage records (RUN/stages.jsonl): one JSON object per stage run by
// `pipeline --stage` or `--local`, appended when the stage ends:
//   {"stage": "train", "ranks": 2, "start": UNIX_S, "end": UNIX_S, "wall_s": S, "exit_status": 0,
//    "job_id": "123" | null}
// Written by the pipeline; read by the pipeline (what a stage's job left) and by release-gate costs
// (the run's local costs). This is the one declaration of the line and its one reader.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/base/json_record.hpp"

namespace shardtrain {

struct StageRecord {
  std::string stage;
  int ranks = 1;                       // [1, 2^24]
  double start = 0, end = 0;           // unix seconds (0: not recorded)
  std::optional<double> recorded_wall_s;  // the line's "wall_s" as read (a line may have it without start and end)
  int exit_status = 1;                 // [-255, 255]; a line without it counts as failed
  std::string job_id;                  // "" -> null (a stage run here, not as a Slurm job)
  double wall_s() const { return recorded_wall_s.value_or(end - start); }
  // The line's keys, once (base/json_record.hpp); "wall_s" is written as wall_s() (to_json_line).
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("stage", &StageRecord::stage), key("ranks", &StageRecord::ranks, whole_in(1, 1 << 24), kMayBeAbsent),
                      key("start", &StageRecord::start, kMayBeAbsent), key("end", &StageRecord::end, kMayBeAbsent),
                      key("wall_s", &StageRecord::recorded_wall_s, in(NumberRange::at_least(0)), kMayBeAbsent),
                      key("exit_status", &StageRecord::exit_status, whole_in(-255, 255), kMayBeAbsent),
                      key("job_id", &StageRecord::job_id, empty_as_null, kMayBeAbsent)};
  }
};

// The record as one line of stages.jsonl (no newline); "wall_s" is wall_s().
std::string to_json_line(const StageRecord& record);

// Appends `record` to `file` (its folder created when missing); IoError when it cannot.
void append_stage_record(const std::string& file, const StageRecord& record);

// Every record of `file` in order (none when it does not exist). A line that is not a JSON object
// is skipped (a stage killed while it wrote its line); an object is read strictly by fields():
// "stage" a string, "ranks" and "exit_status" integers in their ranges (absent: 1), "start", "end"
// and "wall_s" finite numbers (wall_s >= 0; absent: 0, none), "job_id" a string or null; anything
// else is a UsageError naming "FILE:LINE: stage record" and the field by its JSON pointer.
std::vector<StageRecord> read_stage_records(const std::string& file);

}  // namespace shardtrain
