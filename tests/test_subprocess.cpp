// base/subprocess.hpp's helpers that need no child: the last lines of a child's log, which the
// benchmark runner and gpu-check quote when a command fails.
#include <catch2/catch.hpp>

#include <fstream>

#include "shardtrain/base/subprocess.hpp"
#include "test_support.hpp"

using namespace shardtrain;

TEST_CASE("subprocess: the last lines of a log, fewer when it has fewer, none when it is missing", "[base]") {
  const std::string dir = test::temp_dir("last-lines");
  std::ofstream(dir + "/log") << "one\ntwo\nthree\nfour";  // the last line without its newline
  CHECK(last_lines_of(dir + "/log", 2) == std::vector<std::string>{"three", "four"});
  CHECK(last_lines_of(dir + "/log", 10) == std::vector<std::string>{"one", "two", "three", "four"});
  CHECK(last_lines_of(dir + "/log", 0).empty());
  CHECK(last_lines_of(dir + "/missing", 3).empty());
}
