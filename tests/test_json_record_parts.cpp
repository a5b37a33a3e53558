// base/json_record.hpp's entries for parts of a record: when (keys written only when a predicate
// holds, read when the first is present), written_by, kOmittedWhenEmpty on containers, maps keyed
// by an int, keyed_by (a vector as an object keyed by a member) and whole_in.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_record.hpp"

using namespace shardtrain;
using nlohmann::json;

namespace {

struct Peer {
  std::uint64_t bytes = 0;
  double s = 0;
  static auto fields() { return std::tuple{json_fields::key("bytes", &Peer::bytes), json_fields::key("s", &Peer::s)}; }
  bool operator==(const Peer&) const = default;
};

struct Level {
  std::string name;
  bool inter = false;
  int ranks = 0;
  bool operator==(const Level&) const = default;
};
auto level_fields() { return std::tuple{json_fields::key("inter", &Level::inter), json_fields::key("ranks", &Level::ranks)}; }

struct Parts {
  int stage = 0;
  double formula = 0;
  std::string why;                 // left out when empty
  std::vector<int> list;           // left out when empty
  std::map<int, Peer> peers;       // {"0": {...}}
  std::vector<Level> levels;       // {"name": {...}}
  int ranks = 1;                   // [1, 16]
  bool has_stage() const { return stage > 0; }
  static auto fields() {
    using namespace json_fields;
    return std::tuple{when(&Parts::has_stage, key("stage", &Parts::stage), key("formula", &Parts::formula),
                           written_by("twice", [](const Parts& p) { return 2 * p.stage; })),
                      key("why", &Parts::why, kOmittedWhenEmpty), key("list", &Parts::list, kOmittedWhenEmpty),
                      key("peers", &Parts::peers), key("levels", &Parts::levels, keyed_by(&Level::name, level_fields())),
                      key("ranks", &Parts::ranks, whole_in(1, 16))};
  }
  bool operator==(const Parts&) const = default;
};

JsonFile file_of(const json& j) { return JsonFile::parse(j.dump(), "p.json", "the parts"); }
Parts read_back(const json& j) { return json_fields::read<Parts>(file_of(j), ""); }

}  // namespace

TEST_CASE("json record parts: when, written_by and omitted empty containers", "[json]") {
  Parts p;
  json j = json_fields::write(p);
  CHECK(j == json::parse(R"({"peers": {}, "levels": {}, "ranks": 1})"));  // no stage part, no why, no list
  CHECK(read_back(j) == p);
  p.stage = 3, p.formula = 1.5, p.why = "slow", p.list = {4};
  j = json_fields::write(p);
  CHECK(j == json::parse(R"({"stage": 3, "formula": 1.5, "twice": 6, "why": "slow", "list": [4], "peers": {},
                             "levels": {}, "ranks": 1})"));
  CHECK(j["stage"].is_number_integer());
  CHECK(read_back(j) == p);
  j.erase("formula");  // the part is read whole once its first key is there
  CHECK_THROWS_WITH(read_back(j), "p.json: the parts has no field /formula");
}

TEST_CASE("json record parts: int-keyed maps, keyed_by vectors and whole_in", "[json]") {
  Parts p;
  p.peers = {{0, {10, 0.5}}, {12, {20, 0.25}}};
  p.levels = {{"cross", true, 2}, {"node", false, 4}};
  p.ranks = 16;
  json j = json_fields::write(p);
  CHECK(j["peers"] == json::parse(R"({"0": {"bytes": 10, "s": 0.5}, "12": {"bytes": 20, "s": 0.25}})"));
  CHECK(j["levels"] == json::parse(R"({"cross": {"inter": true, "ranks": 2}, "node": {"inter": false, "ranks": 4}})"));
  CHECK(read_back(j) == p);
  json bad = j;
  bad["peers"]["x"] = {{"bytes", 1}, {"s", 1}};
  CHECK_THROWS_WITH(read_back(bad), "p.json: the parts field /peers has key \"x\": not a rank (a whole number >= 0)");
  bad = j;
  bad["peers"]["-1"] = {{"bytes", 1}, {"s", 1}};
  CHECK_THROWS_WITH(read_back(bad), Catch::Contains("has key \"-1\": not a rank"));
  bad = j;
  bad["peers"]["0"].erase("s");
  CHECK_THROWS_WITH(read_back(bad), "p.json: the parts has no field /peers/0/s");
  bad = j;
  bad["levels"]["node"]["ranks"] = "four";
  CHECK_THROWS_WITH(read_back(bad), Catch::Contains("/levels/node/ranks"));
  bad = j;
  bad["ranks"] = 17;
  CHECK_THROWS_WITH(read_back(bad), "p.json: the parts field /ranks is 17, not in [1, 16]");
  bad["ranks"] = 2.5;
  CHECK_THROWS_WITH(read_back(bad), Catch::Contains("field /ranks"));
}
