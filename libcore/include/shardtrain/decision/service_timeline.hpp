// What was in service when, from the registry's records: every promotion and every rollback in
// the order of the times in their file names (registry_time.hpp). `release-gate history --at T`
// answers from it, and a decision asks it whether a rollback still stands (decision.hpp). Pure.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/decision/monitoring_record.hpp"
#include "shardtrain/decision/record.hpp"

namespace shardtrain {

// One move of the in-service pointer, as the registry's records tell it.
struct ServiceEvent {
  std::string effective;   // RFC 3339 (microseconds): the time in the record's file name
  std::optional<std::string> record;      // the release record in service from then on (none: a baseline)
  std::optional<std::string> checkpoint;
  std::optional<ServedBaseline> baseline;  // the baseline in service from then on (a rollback's to_baseline)
  std::string cause;       // the release record (a promotion) or the rollback record that moved it
  std::string why;         // one sentence: the promotion, or the rollback with its first reason and the other failed checks by name
  bool operator==(const ServiceEvent&) const = default;
  static auto fields() {  // written only (history --at): null where none
    using namespace json_fields;
    using E = ServiceEvent;
    return std::tuple{key("effective", &E::effective), key("record", &E::record), key("checkpoint", &E::checkpoint),
                      key("baseline", &E::baseline), key("cause", &E::cause), key("why", &E::why)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  // "records/<...>.json" or "baseline <name>"
  std::string in_service_name() const;
};
// Every promotion (a release record with decision promote, not a dry run) and every rollback, oldest
// first (by the time in their file names). Pure.
std::vector<ServiceEvent> service_timeline(const std::vector<ReleaseRecord>& records,
                                           const std::vector<RollbackRecord>& rollbacks);
// The event in force at `at_micros` (unix microseconds, rfc3339_micros): the newest one whose
// effective time is <= at; nothing before the first promotion.
std::optional<ServiceEvent> in_service_at(const std::vector<ServiceEvent>& timeline, std::int64_t at_micros);
// The rollback that put the current release in service (the timeline's last event is a rollback),
// else nothing: a promotion since clears it.
std::optional<RollbackRecord> standing_rollback(const std::vector<ReleaseRecord>& records,
                                                const std::vector<RollbackRecord>& rollbacks);
// history --at's answer: "in service at T: <record> (checkpoint ...) since E" or "baseline NAME
// (<model file>, sha256 <12>) since E", and "why: ..." on the next line; or nothing.
std::string in_service_at_text(const std::string& at, const std::optional<ServiceEvent>& event);

}  // namespace shardtrain
