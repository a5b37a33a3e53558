// base/json_number.hpp: the one rule for a number field of a JSON object (present or optional, a
// JSON number, finite, in range), with the messages each failure gives.
#include <catch2/catch.hpp>

#include <cmath>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_number.hpp"

using namespace shardtrain;
using nlohmann::json;

TEST_CASE("json number: present, a number, finite, in range, and each failure names the file and key", "[json]") {
  const json j = json::parse(R"({"a": 2, "b": 0.5, "s": "3", "n": null, "neg": -1, "big": 1e300})");
  CHECK(json_number(j, "a", "f.json") == 2);
  CHECK(json_number(j, "b", "f.json", NumberRange::at_least(0)) == 0.5);
  CHECK(json_number(j, "big", "f.json") == 1e300);
  CHECK_THROWS_AS(json_number(j, "zz", "f.json"), UsageError);
  CHECK_THROWS_WITH(json_number(j, "zz", "f.json"), "f.json: 'zz' is missing");
  CHECK_THROWS_WITH(json_number(j, "s", "f.json"), "f.json: 's' is not a number (got \"3\")");
  CHECK_THROWS_WITH(json_number(j, "n", "f.json"), "f.json: 'n' is not a number (got null)");
  CHECK_THROWS_WITH(json_number(j, "neg", "f.json policy", NumberRange::at_least(0)), "f.json policy: 'neg' is -1.0, not >= 0.0");
  CHECK_THROWS_WITH(json_number(j, "a", "f.json", NumberRange{0, 1}), "f.json: 'a' is 2.0, not in [0.0, 1.0]");
  CHECK_THROWS_WITH(json_number(json::array(), "a", "f.json"), "f.json: 'a' is missing");  // not an object
  // Values built in memory can hold what no JSON text parses to.
  const json inf = {{"x", std::numeric_limits<double>::infinity()}}, nan = {{"x", std::nan("")}};
  CHECK_THROWS_WITH(json_number(inf, "x", "m"), "m: 'x' is not finite");
  CHECK_THROWS_WITH(json_number(nan, "x", "m"), "m: 'x' is not finite");
}

TEST_CASE("json number: the optional form reads absent and null as none and checks the rest alike", "[json]") {
  const json j = json::parse(R"({"a": 3, "n": null, "s": true})");
  CHECK(json_optional_number(j, "a", "f") == 3);
  CHECK_FALSE(json_optional_number(j, "n", "f"));
  CHECK_FALSE(json_optional_number(j, "missing", "f"));
  CHECK_THROWS_WITH(json_optional_number(j, "s", "f"), "f: 's' is not a number (got true)");
  CHECK_THROWS_WITH(json_optional_number(j, "a", "f", NumberRange{0, 2}), "f: 'a' is 3.0, not in [0.0, 2.0]");
}
