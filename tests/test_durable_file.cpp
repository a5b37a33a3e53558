// base/durable_file.hpp: both durabilities replace a file whole through a temporary and leave no
// temporary behind; a failed write names the path and leaves the old file as it was.
#include <catch2/catch.hpp>

#include <filesystem>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using shardtrain::test::file_contents;
using shardtrain::test::temp_dir;
namespace fs = std::filesystem;

TEST_CASE("durable_file: a write replaces the file whole and leaves no temporary, durable or only visible",
          "[base]") {
  const Durability durability = GENERATE(Durability::kDurable, Durability::kVisible);
  const std::string dir = temp_dir("durable_file");
  const std::string path = dir + "/record.json";
  write_file_atomically(path, "old\n", durability);
  REQUIRE(file_contents(path) == "old\n");
  const std::string big(3 << 20, 'x');  // several write() calls' worth
  write_file_atomically(path, big, durability);
  CHECK(file_contents(path) == big);
  write_json_file(path, {{"step", 3}}, durability);
  CHECK(nlohmann::json::parse(file_contents(path)) == nlohmann::json{{"step", 3}});
  CHECK_FALSE(fs::exists(path + ".tmp"));
  fs::remove_all(dir);
}

TEST_CASE("durable_file: a write that cannot rename names the path and leaves the target and no temporary",
          "[base]") {
  const Durability durability = GENERATE(Durability::kDurable, Durability::kVisible);
  const std::string dir = temp_dir("durable_file_fail");
  const std::string path = dir + "/target";
  fs::create_directories(path + "/occupied");  // a non-empty folder: rename() over it fails
  try {
    write_file_atomically(path, "new\n", durability);
    FAIL("the write over a non-empty folder succeeded");
  } catch (const IoError& e) {
    CHECK_THAT(e.what(), Catch::Contains(path));
  }
  CHECK(fs::is_directory(path + "/occupied"));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  fs::remove_all(dir);
}
