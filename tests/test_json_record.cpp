// base/json_record.hpp: a type's one field list read and written both ways, each member kind, and
// the errors (the file and the field by its JSON pointer, as json_fields.hpp's readers give them).
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_record.hpp"

using namespace shardtrain;
using nlohmann::json;

namespace {

enum class Colour { kRed, kBlue };
inline constexpr std::pair<const char*, Colour> kColourNames[] = {{"red", Colour::kRed}, {"blue", Colour::kBlue}};

struct Inner {
  double x = 0;
  std::int64_t n = 0;
  static auto fields() { return std::tuple{json_fields::key("x", &Inner::x), json_fields::key("n", &Inner::n)}; }
  bool operator==(const Inner&) const = default;
};

// A type with its own to_json/from_json (not yet on a list): read and written through those.
struct Legacy {
  std::string s;
  json to_json() const { return {{"s", s}}; }
  static Legacy from_json(const JsonFile& f, const std::string& at) { return {f.string(at + "/s")}; }
  bool operator==(const Legacy&) const = default;
};

struct Extra {
  double a = 0, b = 0;
  static auto fields() { return std::tuple{json_fields::key("a", &Extra::a), json_fields::key("b", &Extra::b)}; }
  bool operator==(const Extra&) const = default;
};

struct Record {
  std::string name;
  double ratio = 0;
  std::int64_t steps = 0;
  std::uint64_t bytes = 0;
  int ranks = 0;
  bool done = false;
  std::optional<double> loss;            // present, may be null
  std::optional<int> newer;              // may be absent
  std::optional<std::string> sometimes;  // written only when set
  std::vector<double> values;
  std::vector<Inner> inners;
  std::map<std::string, double> by_owner;
  Inner inner;
  Legacy legacy;
  json config = json::object();
  Colour colour = Colour::kRed;
  double fraction = 0;
  Inner flat;                  // its keys at this level
  std::optional<Extra> extra;  // its keys at this level, together or not at all
  double twice() const { return 2 * ratio; }

  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("name", &Record::name), key("ratio", &Record::ratio), key("steps", &Record::steps),
                      key("bytes", &Record::bytes), key("ranks", &Record::ranks), key("done", &Record::done),
                      key("loss", &Record::loss), key("newer", &Record::newer, kMayBeAbsent),
                      key("sometimes", &Record::sometimes, kOmittedWhenEmpty), key("values", &Record::values),
                      key("inners", &Record::inners), key("by_owner", &Record::by_owner), key("inner", &Record::inner),
                      key("legacy", &Record::legacy), key("config", &Record::config, object),
                      key("colour", &Record::colour, names(kColourNames)),
                      key("fraction", &Record::fraction, in(NumberRange{0, 1})), inlined(&Record::flat),
                      inlined(&Record::extra), written("twice", &Record::twice)};
  }
  bool operator==(const Record&) const = default;
};

Record sample() {
  Record r;
  r.name = "run";
  r.ratio = 0.5;
  r.steps = 7;
  r.bytes = 1ull << 40;
  r.ranks = 2;
  r.done = true;
  r.loss = 2.25;
  r.values = {1, 2.5};
  r.inners = {{1, 2}, {3, 4}};
  r.by_owner = {{"a", 1.5}};
  r.inner = {0.25, -3};
  r.legacy = {"old"};
  r.config = {{"k", 1}};
  r.colour = Colour::kBlue;
  r.fraction = 0.75;
  r.flat = {9, 10};
  return r;
}

JsonFile file_of(const json& j) { return JsonFile::parse(j.dump(), "f.json", "the record"); }
Record read_back(const json& j) { return json_fields::read<Record>(file_of(j), ""); }

}  // namespace

TEST_CASE("json record: a field list written and read back gives the same value", "[json]") {
  Record r = sample();
  CHECK(read_back(json_fields::write(r)) == r);
  r.extra = Extra{1, 2};
  r.newer = 3;
  r.sometimes = "yes";
  r.loss.reset();
  CHECK(read_back(json_fields::write(r)) == r);
}

TEST_CASE("json record: each member kind is written as the hand-written writers did", "[json]") {
  Record r = sample();
  const json j = json_fields::write(r);
  CHECK(j.at("steps").is_number_integer());
  CHECK(j.at("bytes").is_number_unsigned());
  CHECK(j.at("ranks").is_number_integer());
  CHECK(j.at("ratio").is_number_float());
  CHECK(j.at("loss") == 2.25);
  CHECK(j.at("newer").is_null());         // an empty optional: null
  CHECK_FALSE(j.contains("sometimes"));  // ... unless omitted when empty
  CHECK(j.at("values") == json::array({1.0, 2.5}));
  CHECK(j.at("inners") == json::parse(R"([{"x": 1.0, "n": 2}, {"x": 3.0, "n": 4}])"));
  CHECK(j.at("by_owner") == json::parse(R"({"a": 1.5})"));
  CHECK(j.at("legacy") == json::parse(R"({"s": "old"})"));
  CHECK(j.at("colour") == "blue");
  CHECK(j.at("x") == 9.0);  // the inlined member's keys at this level
  CHECK(j.at("n") == 10);
  CHECK_FALSE(j.contains("a"));  // an empty inlined optional: none of its keys
  CHECK(j.at("twice") == 1.0);
  r.extra = Extra{1, 2};
  CHECK(json_fields::write(r).at("b") == 2.0);
}

TEST_CASE("json record: absent, null and newer keys", "[json]") {
  json j = json_fields::write(sample());
  j.erase("newer");
  j.erase("sometimes");
  CHECK_FALSE(read_back(j).newer);  // may be absent
  j["newer"] = nullptr;
  CHECK_FALSE(read_back(j).newer);
  j["sometimes"] = nullptr;
  CHECK_FALSE(read_back(j).sometimes);
  j["a"] = 5;  // an inlined optional is read when its first key is present
  CHECK_THROWS_WITH(read_back(j), "f.json: the record has no field /b");
}

TEST_CASE("json record: a missing or mistyped field is named by its pointer", "[json]") {
  const json good = json_fields::write(sample());
  const auto with = [&](const char* pointer, const json& v) {
    json j = good;
    j[json::json_pointer(pointer)] = v;
    return j;
  };
  json missing = good;
  missing.erase("loss");
  CHECK_THROWS_AS(read_back(missing), UsageError);
  CHECK_THROWS_WITH(read_back(missing), "f.json: the record has no field /loss");  // required even though nullable
  missing = good;
  missing["inner"].erase("n");
  CHECK_THROWS_WITH(read_back(missing), "f.json: the record has no field /inner/n");
  CHECK_THROWS_WITH(read_back(with("/ratio", "x")), "f.json: the record field /ratio is not a number (got \"x\")");
  CHECK_THROWS_WITH(read_back(with("/ratio", nullptr)), "f.json: the record field /ratio is not a number (got null)");
  CHECK_THROWS_WITH(read_back(with("/steps", 1.5)), "f.json: the record field /steps is not an integer (got 1.5)");
  CHECK(read_back(with("/steps", 2.0)).steps == 2);  // a hand-written 2.0
  CHECK_THROWS_WITH(read_back(with("/bytes", -1)), "f.json: the record field /bytes is negative (got -1)");
  CHECK_THROWS_WITH(read_back(with("/ranks", 1e12)), "f.json: the record field /ranks is out of range (got 1000000000000)");
  CHECK_THROWS_WITH(read_back(with("/done", 1)), "f.json: the record field /done is not true or false (got 1)");
  CHECK_THROWS_WITH(read_back(with("/name", nullptr)), "f.json: the record field /name is not a string (got null)");
  CHECK_THROWS_WITH(read_back(with("/values/1", "2")), "f.json: the record field /values/1 is not a number (got \"2\")");
  CHECK_THROWS_WITH(read_back(with("/inners/1/x", true)), "f.json: the record field /inners/1/x is not a number (got true)");
  CHECK_THROWS_WITH(read_back(with("/values", 3)), "f.json: the record field /values is not an array (got 3)");
  CHECK_THROWS_WITH(read_back(with("/by_owner/a", "z")), "f.json: the record field /by_owner/a is not a number (got \"z\")");
  CHECK_THROWS_WITH(read_back(with("/inner", 5)), "f.json: the record field /inner is not an object (got 5)");
  CHECK_THROWS_WITH(read_back(with("/config", json::array())), "f.json: the record field /config is not an object (got [])");
  CHECK_THROWS_WITH(read_back(with("/colour", "green")), "f.json: the record field /colour must be red or blue (got 'green')");
  CHECK_THROWS_WITH(read_back(with("/fraction", 2)), "f.json: the record field /fraction is 2.0, not in [0.0, 1.0]");
  CHECK_THROWS_WITH(read_back(with("/legacy/s", 1)), "f.json: the record field /legacy/s is not a string (got 1)");
  CHECK_THROWS_WITH(json_fields::read<Record>(file_of(json::array()), ""), "f.json: the record field  is not an object (got [])");
}

namespace {

struct Checked {
  double lo = 0, hi = 0;
  static auto fields() { return std::tuple{json_fields::key("lo", &Checked::lo), json_fields::key("hi", &Checked::hi)}; }
  void validate(const JsonFile& f, const std::string& at) const {
    if (lo > hi) f.fail("object " + at + " has lo above hi");
  }
};

}  // namespace

TEST_CASE("json record: a type's validate runs after the fields are read", "[json]") {
  CHECK(json_fields::read<Checked>(file_of({{"lo", 1}, {"hi", 2}}), "").hi == 2);
  CHECK_THROWS_WITH(json_fields::read<Checked>(file_of({{"c", {{"lo", 3}, {"hi", 2}}}}), "/c"),
                    "f.json: the record object /c has lo above hi");
}

namespace {

struct Tagged {
  std::optional<std::string> stop;
  double rate_Bps = 0;
  int documents = 0, samples = 0;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{format_tag("format", "shardtrain-tagged", "tagged record"), version("version", 1),
                      constant("kind", "test"), key("stop", &Tagged::stop, in_object("reason")),
                      key("rate_MBps", &Tagged::rate_Bps, scaled(1e-6, 1e6)),
                      group("holdout", key("documents", &Tagged::documents), key("samples", &Tagged::samples))};
  }
  bool operator==(const Tagged&) const = default;
};

}  // namespace

TEST_CASE("json record: format tags, versions, constants and wrapped or scaled values", "[json]") {
  const Tagged t{"user stop", 2.5e6, 3, 4};
  const json j = json_fields::write(t);
  CHECK(j == json::parse(R"({"format": "shardtrain-tagged", "version": 1, "kind": "test", "stop": {"reason": "user stop"},
                            "rate_MBps": 2.5, "holdout": {"documents": 3, "samples": 4}})"));
  CHECK(json_fields::read<Tagged>(file_of(j), "") == t);
  CHECK(json_fields::write(Tagged{})["stop"].is_null());
  json other = j;
  other["format"] = "shardtrain-other";
  CHECK_THROWS_WITH(json_fields::read<Tagged>(file_of(other), ""),
                    "f.json: the record field /format is not \"shardtrain-tagged\": not a tagged record");
  other = j;
  other["version"] = 2;
  CHECK_THROWS_WITH(json_fields::read<Tagged>(file_of(other), ""), "f.json: the record field /version is 2, not 1");
  other = j;
  other["stop"] = json::object();
  CHECK_THROWS_WITH(json_fields::read<Tagged>(file_of(other), ""), "f.json: the record has no field /stop/reason");
  other = j;
  other["holdout"].erase("samples");
  CHECK_THROWS_WITH(json_fields::read<Tagged>(file_of(other), ""), "f.json: the record has no field /holdout/samples");
}

namespace {

// The codecs the decision layer's records use: a non-empty string and list, a number above a
// bound, a version range; an empty string not written.
struct Policy {
  std::string version, note;
  std::vector<std::string> items;
  double horizon = 1, bound = 0.5;
  int format_version = 2;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("version", &Policy::version, non_empty<>), key("note", &Policy::note, kOmittedWhenEmpty),
                      key("items", &Policy::items, non_empty<std::vector<std::string>>),
                      key("horizon", &Policy::horizon, above(0)), key("bound", &Policy::bound, above(0, 1)),
                      key("format_version", &Policy::format_version, versions(1, 2), kMayBeAbsent)};
  }
  bool operator==(const Policy&) const = default;
};

Policy read_policy(const json& j) { return json_fields::read_json<Policy>(j, "p.json", "the policy"); }

}  // namespace

TEST_CASE("json record: non-empty values, a number above a bound, a version range, JSON in memory", "[json]") {
  const Policy p{"1", "", {"a"}, 30, 0.05, 2};
  const json j = json_fields::write(p);
  CHECK_FALSE(j.contains("note"));  // an empty string with kOmittedWhenEmpty
  CHECK(read_policy(j) == p);
  Policy noted = p;
  noted.note = "n";
  CHECK(json_fields::write(noted)["note"] == "n");
  CHECK(read_policy(json_fields::write(noted)) == noted);
  auto with = [&](const char* key, const json& v) {
    json w = j;
    w[key] = v;
    return w;
  };
  CHECK_THROWS_WITH(read_policy(with("version", "")), "p.json: the policy field /version is empty");
  CHECK_THROWS_WITH(read_policy(with("items", json::array())), "p.json: the policy field /items is empty");
  CHECK_THROWS_WITH(read_policy(with("horizon", 0)), "p.json: the policy field /horizon is 0.0, not > 0.0");
  CHECK_THROWS_WITH(read_policy(with("bound", 1.5)), "p.json: the policy field /bound is 1.5, not > 0.0 and <= 1.0");
  CHECK(read_policy(with("bound", 1)).bound == 1);
  CHECK_THROWS_WITH(read_policy(with("format_version", 3)),
                    "p.json: the policy field /format_version is 3, not 1 to 2 (written by a newer version?)");
  CHECK(read_policy(with("format_version", 1)).format_version == 1);
  json old = j;
  old.erase("format_version");
  CHECK(read_policy(old).format_version == 2);  // absent: the member's default
  CHECK_THROWS_WITH(read_policy(json::array()), Catch::Contains("p.json: the policy field  is not an object"));
}

namespace {
// unless_default: a member that is not an optional, written only while it differs from its default.
struct Pair {
  double x = 0, y = 0;
  bool operator==(const Pair&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("x", &Pair::x), key("y", &Pair::y)};
  }
};
struct Sparse {
  Pair link;
  std::map<std::string, int> counts;
  bool operator==(const Sparse&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{unless_default(key("link", &Sparse::link)), unless_default(key("counts", &Sparse::counts))};
  }
};
}  // namespace

TEST_CASE("json record: a member other than an optional omitted while it is its default", "[json]") {
  CHECK(json_fields::write(Sparse{}) == json::object());
  CHECK(json_fields::read<Sparse>(file_of(json::object()), "") == Sparse{});
  const Sparse s{{2.5, 0}, {{"a", 1}}};
  const json j = json_fields::write(s);
  CHECK(j == json::parse(R"({"link": {"x": 2.5, "y": 0.0}, "counts": {"a": 1}})"));
  CHECK(json_fields::read<Sparse>(file_of(j), "") == s);
}
