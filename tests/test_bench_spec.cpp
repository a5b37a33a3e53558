// scale-bench compare's spec (bench/bench_spec.hpp): reading a spec, its one-line refusals naming
// the file and the field, --set, placeholder expansion with argument lists, the rounds' order;
// and every spec of bench/specs/ read and expanded as `compare --dry-run` would.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "shardtrain/bench/bench_runner.hpp"
#include "shardtrain/bench/bench_spec.hpp"
#include "test_support.hpp"

namespace shardtrain::bench {
namespace {

// A small valid spec; each test changes one field of it.
nlohmann::json small_spec() {
  return nlohmann::json::parse(R"({
    "about": "fast against deterministic",
    "rounds": 2, "order": "alternate",
    "options": {"steps": "3", "model": "tiny", "previous_bin": ""},
    "args": {"tiny": ["--layers", "2", "--steps", "{steps}"], "big": ["--layers", "12"]},
    "env": {"OMPI_ALLOW_RUN_AS_ROOT": "1"},
    "variants": [
      {"name": "fast", "command": ["mpirun", "-np", "2", "{bin}/ddp-train", "@{model}", "--run-dir", "{run}"]},
      {"name": "det", "command": ["{bin}/ddp-train", "--deterministic", "--run-dir", "{run}"]},
      {"name": "prev", "command": ["{previous_bin}/ddp-train", "--baseline", "{run:fast}/summary.json"],
       "when": "previous_bin"}
    ],
    "readings": [
      {"name": "step_s", "pointer": "/median_step_s"},
      {"name": "step_ms", "derived": "step_s * step_s", "scale": 1000, "show": false}
    ],
    "ratios": [{"name": "det/fast", "reading": "step_s", "baseline": "fast", "variants": ["det"]}],
    "checks": [{"column": "det/fast", "max": 1.10}]
  })");
}

BenchSpec parse(const nlohmann::json& j) { return parse_bench_spec(JsonFile::parse(j.dump(), "s.json", "the benchmark spec")); }

std::string refusal(const nlohmann::json& j) { return test::usage_error_of([&] { parse(j); }); }

TEST_CASE("bench spec: a valid spec reads into its typed parts", "[bench-harness]") {
  const BenchSpec s = parse(small_spec());
  CHECK(s.path == "s.json");
  CHECK(s.rounds == 2);
  CHECK(s.alternate);
  REQUIRE(s.variants.size() == 3);
  CHECK(s.variants[2].when == "previous_bin");
  CHECK(s.variants[0].exit_ok == std::vector<int>{0});
  REQUIRE(s.readings.size() == 2);
  CHECK(s.readings[0].kind == ReadingKind::kJson);
  CHECK(s.readings[0].file == "summary.json");  // the default file of a pointer reading
  CHECK(s.readings[1].kind == ReadingKind::kDerived);
  CHECK(s.readings[1].expr == "step_s * step_s");
  CHECK_FALSE(s.readings[1].shown);
  REQUIRE(s.checks.size() == 1);
  CHECK(*s.checks[0].max == Approx(1.10));
  CHECK_FALSE(s.checks[0].min);
}

TEST_CASE("bench spec: each malformed field is refused in one line naming the file and the field", "[bench-harness]") {
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* says;
  };
  const Case cases[] = {
      {"/rounds", 0, "s.json: the benchmark spec field /rounds must be at least 1"},
      {"/order", "random", "field /order is \"fixed\" or \"alternate\""},
      {"/variants/0/name", 3, "/variants/0/name"},
      {"/variants/1/name", "fast", "field /variants/1/name: \"fast\" is named twice"},
      {"/variants/0/command", nlohmann::json::array(), "field /variants/0/command is an empty command"},
      {"/variants/0/when", "nope", "field /variants/0/when: no option \"nope\""},
      {"/variants/0/command/3", "{bin}/{tool}", "field /variants/0/command/3: unknown placeholder {tool}"},
      {"/variants/0/command/3", "{run:slow}", "unknown placeholder {run:slow}"},
      {"/variants/0/every", true, "field /variants/0/every is not a field of the benchmark spec here"},
      {"/readings/0/regex", "(", "field /readings/0/regex is not a regular expression"},
      {"/readings/0/reduce", "median", "field /readings/0/reduce is not one of only, first"},
      {"/readings/1/derived", "step_s ^ 2", "/readings/1/derived: expression \"step_s ^ 2\" at character 8: unexpected '^'"},
      {"/readings/1/derived", "(step_s", "/readings/1/derived: expression \"(step_s\" at character 8: ')' expected"},
      {"/readings/1/derived", "late / step_s", "/readings/1/derived: no reading \"late\" before"},
      {"/ratios/0/over", "tok_s", "field /ratios/0/over: no reading \"tok_s\""},
      {"/ratios/0/baseline", "slow", "field /ratios/0/baseline: no variant \"slow\""},
      {"/ratios/0/reading", "tok_s", "field /ratios/0/reading: no reading \"tok_s\""},
      {"/checks/0/column", "det/slow", "field /checks/0/column: no reading or ratio \"det/slow\""},
      {"/checks/0/max", "1.1", "/checks/0/max is not a number"},
      {"/args/tiny/3", "{stepz}", "field /args/tiny/3: unknown placeholder {stepz}"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = small_spec();
    j[nlohmann::json::json_pointer(c.pointer)] = c.value;
    const std::string message = refusal(j);
    INFO(c.pointer << " -> " << message);
    CHECK(message.find("s.json: ") == 0);
    CHECK(message.find(c.says) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("bench spec: structural refusals: no variants, a reading of two kinds, a check without a bound", "[bench-harness]") {
  nlohmann::json j = small_spec();
  j["variants"] = nlohmann::json::array();
  CHECK(refusal(j).find("field /variants must name at least one variant") != std::string::npos);
  j = small_spec();
  j["readings"][0]["wall"] = true;
  CHECK(refusal(j).find("reading /readings/0 needs exactly one of pointer, regex, wall, bytes, derived") != std::string::npos);
  j = small_spec();
  j["checks"][0].erase("max");
  CHECK(refusal(j).find("check /checks/0 needs min or max") != std::string::npos);
  j = small_spec();
  j["readings"][0]["where"] = {{"pointer", "/time"}, {"equals", "step_s"}};
  CHECK(refusal(j).find("field /readings/0/where needs a pointer with a \"*\" segment") != std::string::npos);
  j = small_spec();
  j.erase("about");
  CHECK(refusal(j).find("has no field /about") != std::string::npos);
}

TEST_CASE("bench spec: --set changes an option and refuses an unknown key", "[bench-harness]") {
  BenchSpec s = parse(small_spec());
  apply_setting(s, "model=big");
  CHECK(s.options["model"] == "big");
  apply_setting(s, "previous_bin=/old/bin=x");  // the value is everything after the first '='
  CHECK(s.options["previous_bin"] == "/old/bin=x");
  CHECK(test::usage_error_of([&] { apply_setting(s, "modle=big"); }) ==
        "--set modle: s.json has no option modle (its options: model, previous_bin, steps)");
  CHECK(test::usage_error_of([&] { apply_setting(s, "model"); }) == "--set model: give KEY=VALUE");
}

TEST_CASE("bench spec: placeholders and argument lists expand, run folders are WORK/rROUND/VARIANT", "[bench-harness]") {
  BenchSpec s = parse(small_spec());
  const Places p = places_for(s, "/b", "/d", "/w", 2, "fast");
  CHECK(p.at("run") == "/w/r2/fast");
  CHECK(p.at("log") == "/w/r2/fast.log");
  CHECK(p.at("run:det") == "/w/r2/det");
  CHECK(p.at("round") == "2");
  CHECK(p.at("spec_dir") == std::filesystem::current_path().string());  // "s.json" is in the current folder
  CHECK(expand("{bin}/x-{round}", p, "here") == "/b/x-2");
  CHECK(expand("no braces", p, "here") == "no braces");
  CHECK(test::usage_error_of([&] { expand("{bin", p, "here"); }) == "here: \"{bin\" has a '{' without its '}'");
  CHECK(expand_command(s, s.variants[0].command, p, "cmd") ==
        std::vector<std::string>{"mpirun", "-np", "2", "/b/ddp-train", "--layers", "2", "--steps", "3", "--run-dir", "/w/r2/fast"});
  apply_setting(s, "model=huge");
  const Places q = places_for(s, "/b", "/d", "/w", 1, "fast");
  CHECK(test::usage_error_of([&] { expand_command(s, s.variants[0].command, q, "cmd"); }) ==
        "cmd/4: no argument list \"huge\" in /args");
}

TEST_CASE("bench spec: a round runs the variants whose option is set, even rounds reversed when alternating", "[bench-harness]") {
  BenchSpec s = parse(small_spec());
  auto names = [&](int round) {
    std::vector<std::string> out;
    for (const Variant* v : round_order(s, round)) out.push_back(v->name);
    return out;
  };
  CHECK(names(1) == std::vector<std::string>{"fast", "det"});  // prev: previous_bin is empty
  CHECK(names(2) == std::vector<std::string>{"det", "fast"});
  apply_setting(s, "previous_bin=/old");
  CHECK(names(3) == std::vector<std::string>{"fast", "det", "prev"});
  s.alternate = false;
  CHECK(names(2) == std::vector<std::string>{"fast", "det", "prev"});
}

TEST_CASE("bench spec: an include's options, lists and environment merge under the spec's own", "[bench-harness]") {
  const std::string dir = test::temp_dir("bench-include");
  std::filesystem::create_directories(dir + "/include");
  std::ofstream(dir + "/include/shared.json")
      << R"({"options": {"model": "tiny", "steps": "9"}, "args": {"tiny": ["--layers", "2"]}, "env": {"A": "1"}})";
  std::ofstream(dir + "/spec.json") << R"({"about": "x", "include": ["include/shared.json"], "options": {"steps": "3"},
    "variants": [{"name": "v", "command": ["t", "@{model}", "--steps", "{steps}"]}]})";
  const BenchSpec s = read_bench_spec(dir + "/spec.json");
  CHECK(s.options.at("steps") == "3");  // the spec's own value wins
  CHECK(s.options.at("model") == "tiny");
  CHECK(s.env.at("A") == "1");
  const Places p = places_for(s, "/b", "/d", "/w", 1, "v");
  CHECK(expand_command(s, s.variants[0].command, p, "c") == std::vector<std::string>{"t", "--layers", "2", "--steps", "3"});
  std::ofstream(dir + "/include/shared.json") << R"({"variants": []})";
  CHECK(test::usage_error_of([&] { read_bench_spec(dir + "/spec.json"); }) ==
        dir + "/include/shared.json: the benchmark spec's include field /variants is not a field of the benchmark spec here");
}

// The specs the project ships: each reads, and its setup and round-1 commands expand (what
// `scale-bench compare SPEC --dry-run` prints), so a spec cannot rot unnoticed between runs.
TEST_CASE("bench spec: every spec in bench/specs reads and expands", "[bench-harness]") {
  const std::filesystem::path dir = std::filesystem::path(test::testdata_path("")).parent_path().parent_path() / "bench" / "specs";
  int specs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path());
    const BenchSpec s = read_bench_spec(entry.path().string());
    CompareOptions o;
    o.bin_dir = "/bin-dir";
    const std::string plan = planned_commands(s, o);
    CHECK(plan.find("/bin-dir/") != std::string::npos);
    ++specs;
  }
  CHECK(specs >= 1);
}

}  // namespace
}  // namespace shardtrain::bench
