// Numbers as text, both ways. Printing: one number through a printf format ("%.3f", "%g"); the
// tables and messages of the step model, the fit and the planner print every figure this way.
// Reading: the one strict rule for a number written by a person (every tool option through
// tool/numbers.hpp, a batch job's variables through launch/batch_job.hpp).
#pragma once
#include <cstdio>
#include <string>

namespace shardtrain {

// `printf_format` takes exactly one double ("%.2f GB" is fine); the text is cut at 63 characters.
inline std::string number_text(const char* printf_format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), printf_format, value);
  return buf;
}

// What a strictly read number may be: a whole number within 64 bits (signed or unsigned), or a
// finite real.
enum class NumberKind { kSigned, kUnsigned, kReal };

// "" when `text` is such a number, else why not (without the name of what it was given to):
//   whole numbers: plain decimal (an optional sign, digits, no leading 0 that would read as octal,
//     no base prefix), within 64 bits, not negative unless `negative_ok` (never for kUnsigned);
//   reals: the whole text a number (strtod), finite, not negative unless `negative_ok`.
std::string strict_number_problem(const std::string& text, NumberKind kind, bool negative_ok);

}  // namespace shardtrain
