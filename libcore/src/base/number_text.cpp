#include "shardtrain/base/number_text.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace shardtrain {
namespace {

std::string quoted(const std::string& text) { return "'" + text + "'"; }

}  // namespace

std::string strict_number_problem(const std::string& text, NumberKind kind, bool negative_ok) {
  const std::string nonnegative = negative_ok ? "" : ", at least 0";
  if (kind == NumberKind::kReal) {
    char* end = nullptr;
    errno = 0;
    const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) return quoted(text) + " is not a number";
    if (!std::isfinite(v)) return quoted(text) + " is not a finite number";
    if (v < 0 && !negative_ok) return quoted(text) + " is negative; give a number of at least 0";
    return "";
  }
  const bool is_unsigned = kind == NumberKind::kUnsigned;
  const std::string range = is_unsigned ? "a whole number from 0 to 18446744073709551615"
                                        : "a whole number within 64 bits" + nonnegative;
  std::size_t digits = 0;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) digits = 1;
  if (digits == text.size() || text.find_first_not_of("0123456789", digits) != std::string::npos)
    return quoted(text) + " is not a whole number written in decimal; give " + range;
  if (text.size() - digits > 1 && text[digits] == '0')
    return quoted(text) + " has a leading 0 (it would read as octal); give " + range;
  const bool negative = text[0] == '-' && text.find_first_not_of('0', 1) != std::string::npos;
  if (negative && (is_unsigned || !negative_ok)) return quoted(text) + " is negative; give " + range;
  errno = 0;
  if (is_unsigned)
    (void)std::strtoull(text.c_str(), nullptr, 10);
  else
    (void)std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return quoted(text) + " is out of range; give " + range;
  return "";
}

}  // namespace shardtrain
