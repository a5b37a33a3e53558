// The times in the registry's file names (registry_time.hpp).
#include "shardtrain/decision/registry_time.hpp"

#include <algorithm>
#include <cctype>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/time.hpp"

namespace shardtrain {

// "records/20261204T194532.123456Z-..." -> "2026-12-04T19:45:32.123456Z"
std::string registry_stamp_rfc3339(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const bool ok = name.size() >= 23 && name[8] == 'T' && name[15] == '.' && name[22] == 'Z' &&
                  std::all_of(name.begin(), name.begin() + 8, ::isdigit) &&
                  std::all_of(name.begin() + 9, name.begin() + 15, ::isdigit) &&
                  std::all_of(name.begin() + 16, name.begin() + 22, ::isdigit);
  if (!ok) throw UsageError("'" + path + "' is not a registry file name (<YYYYMMDDTHHMMSS.ffffffZ>-...)");
  return name.substr(0, 4) + "-" + name.substr(4, 2) + "-" + name.substr(6, 2) + "T" + name.substr(9, 2) + ":" +
         name.substr(11, 2) + ":" + name.substr(13, 2) + name.substr(15, 8);
}

std::int64_t registry_stamp_seconds(const std::string& record_path) {
  return parse_rfc3339(registry_stamp_rfc3339(record_path), record_path);
}

std::int64_t rfc3339_micros(const std::string& text, const std::string& what) {
  const std::int64_t seconds = parse_rfc3339(text, what);  // validates the whole text
  std::int64_t micros = 0;
  const auto dot = text.find('.');
  if (dot != std::string::npos) {
    int digits = 0;
    for (std::size_t i = dot + 1; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
      if (digits < 6) micros = micros * 10 + (text[i] - '0'), ++digits;
    for (; digits < 6; ++digits) micros *= 10;
  }
  // A time before 1970 truncates toward the earlier second: its fraction still counts upward from it.
  return seconds * 1000000 + micros;
}

}  // namespace shardtrain
