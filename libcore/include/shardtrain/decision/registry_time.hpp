// The times in the registry's file names, and RFC 3339 times to the microsecond: what orders the
// registry's records (service_timeline.hpp, registry_history.hpp) and what `release-gate history
// --at T` compares T with.
#pragma once
#include <cstdint>
#include <string>

namespace shardtrain {

// The registry's file names start "YYYYMMDDTHHMMSS.ffffffZ" (UTC): that time as RFC 3339 and as
// unix seconds (truncated). UsageError for a name that does not.
std::string registry_stamp_rfc3339(const std::string& record_path);
std::int64_t registry_stamp_seconds(const std::string& record_path);
// An RFC 3339 time as unix microseconds: its fraction's first six digits count (base/time.hpp's
// parse_rfc3339 truncates to the second), so a time copied from an event names that event.
std::int64_t rfc3339_micros(const std::string& text, const std::string& what = "time");

}  // namespace shardtrain
