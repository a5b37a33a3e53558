// A whole text file in memory (logs, a JUnit file): what deviceproof reads that is not JSON.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "shardtrain/base/error.hpp"

namespace shardtrain::deviceproof {

// The file's bytes; IoError naming it when it cannot be opened.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open (no such file)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace shardtrain::deviceproof
