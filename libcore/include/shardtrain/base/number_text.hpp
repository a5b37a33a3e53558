// One number as text through a printf format ("%.3f", "%g"): the tables and messages of the step
// model, the fit and the planner print every figure this way.
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

}  // namespace shardtrain
