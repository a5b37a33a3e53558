// RFC 3339 date-times <-> unix seconds (data cutoffs, checkpoint creation times).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace shardtrain {

// Strict RFC 3339 date-time: "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)"; 'T'/'Z' may be
// lower case; calendar validated (month lengths, leap years), second 60 accepted (leap second).
// Returns unix seconds UTC, fraction truncated toward the earlier second. Throws UsageError
// "<what>: '<text>' is not an RFC 3339 date-time (<why>)".
std::int64_t parse_rfc3339(const std::string& text, const std::string& what = "time");
// Same check, returning nullopt and the reason instead of throwing.
std::optional<std::int64_t> try_parse_rfc3339(const std::string& text, std::string* why = nullptr);
// Unix seconds -> "YYYY-MM-DDTHH:MM:SSZ".
std::string format_rfc3339(std::int64_t unix_seconds);
// The current time, as format_rfc3339 writes it.
std::string now_rfc3339();
// The current time in unix seconds with its fraction (the system clock).
double unix_now();

}  // namespace shardtrain
