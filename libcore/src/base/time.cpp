// RFC 3339 parsing and formatting (proleptic Gregorian calendar, UTC).
#include "shardtrain/base/time.hpp"

#include <chrono>

#include <cstdio>
#include <ctime>

#include "shardtrain/base/error.hpp"

namespace shardtrain {

namespace {
// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + int64_t(doe) - 719468;
}
void civil_from_days(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = unsigned(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = int64_t(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp + (mp < 10 ? 3 : -9);
  y += m <= 2;
}
bool digits_at(const std::string& s, std::size_t pos, std::size_t n, int& value) {
  if (pos + n > s.size()) return false;
  value = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    value = value * 10 + (s[i] - '0');
  }
  return true;
}
}  // namespace

std::optional<int64_t> try_parse_rfc3339(const std::string& s, std::string* why) {
  auto fail = [&](const char* reason) -> std::optional<int64_t> {
    if (why) *why = reason;
    return std::nullopt;
  };
  int year, month, day, hour, minute, second;
  if (!digits_at(s, 0, 4, year) || s.size() < 5 || s[4] != '-' || !digits_at(s, 5, 2, month) ||
      s.size() < 8 || s[7] != '-' || !digits_at(s, 8, 2, day))
    return fail("expected YYYY-MM-DD");
  if (s.size() < 11 || (s[10] != 'T' && s[10] != 't')) return fail("expected 'T' after the date");
  if (!digits_at(s, 11, 2, hour) || s.size() < 14 || s[13] != ':' || !digits_at(s, 14, 2, minute) ||
      s.size() < 17 || s[16] != ':' || !digits_at(s, 17, 2, second))
    return fail("expected HH:MM:SS");
  if (month < 1 || month > 12) return fail("month out of range");
  static const int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  int mdays = kDays[month - 1] + (month == 2 && leap ? 1 : 0);
  if (day < 1 || day > mdays) return fail("day out of range for the month");
  if (hour > 23) return fail("hour out of range");
  if (minute > 59) return fail("minute out of range");
  if (second > 60) return fail("second out of range");
  std::size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
    if (pos == start) return fail("empty fraction after '.'");
  }
  if (pos >= s.size()) return fail("missing time zone offset (Z or +HH:MM)");
  int64_t offset_s = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    int oh, om;
    if (!digits_at(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !digits_at(s, pos + 4, 2, om))
      return fail("expected offset +HH:MM or -HH:MM");
    if (oh > 23 || om > 59) return fail("offset out of range");
    offset_s = (int64_t(oh) * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return fail("expected Z or +HH:MM after the time");
  }
  if (pos != s.size()) return fail("trailing characters");
  int64_t days = days_from_civil(year, unsigned(month), unsigned(day));
  return days * 86400 + int64_t(hour) * 3600 + minute * 60 + second - offset_s;
}

int64_t parse_rfc3339(const std::string& text, const std::string& what) {
  std::string why;
  auto t = try_parse_rfc3339(text, &why);
  if (!t) throw UsageError(what + ": '" + text + "' is not an RFC 3339 date-time (" + why + ")");
  return *t;
}

std::string format_rfc3339(int64_t t) {
  int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
  int64_t rem = t - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02dZ", (long long)y, m, d,
                int(rem / 3600), int(rem / 60 % 60), int(rem % 60));
  return buf;
}

std::string now_rfc3339() { return format_rfc3339(std::int64_t(std::time(nullptr))); }

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace shardtrain
