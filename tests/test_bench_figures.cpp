// scale-bench compare's figures (bench/bench_figures.hpp) and readings (bench_runner.hpp's
// read_reading): reductions, derived readings, medians, ratios per round, checks and the #wrong
// count, the one table format and its JSON; readings from files a run leaves (JSON, JSON lines
// with a "where", a log by regular expression, bytes under a folder).
#include <fstream>

#include <catch2/catch.hpp>

#include "shardtrain/bench/bench_expr.hpp"
#include "shardtrain/bench/bench_figures.hpp"
#include "shardtrain/bench/bench_runner.hpp"
#include "test_support.hpp"

namespace shardtrain::bench {
namespace {

BenchSpec spec_of(const std::string& text) {
  return parse_bench_spec(JsonFile::parse(text, "t.json", "the benchmark spec"));
}

// fast and det, two readings (one per-variant), one ratio, a bound on it.
BenchSpec two_variants() {
  return spec_of(R"({"about": "a", "rounds": 3,
    "variants": [{"name": "fast", "command": ["x"]}, {"name": "det", "command": ["y"]}],
    "readings": [{"name": "step_s", "pointer": "/median_step_s"},
                 {"name": "bytes", "pointer": "/b", "variants": ["det"]}],
    "ratios": [{"name": "det/fast", "reading": "step_s", "baseline": "fast"}],
    "checks": [{"column": "det/fast", "max": 1.10}]})");
}

std::vector<RunRow> rows_of(const std::vector<std::tuple<int, std::string, double>>& steps) {
  std::vector<RunRow> rows;
  for (const auto& [round, variant, step] : steps) {
    RunRow r{round, variant, {{"step_s", step}}};
    if (variant == "det") r.values["bytes"] = 100.0 * round;
    rows.push_back(r);
  }
  return rows;
}

TEST_CASE("bench figures: reductions, derived readings and medians", "[bench-harness]") {
  const std::vector<double> n{3, 1, 2};
  CHECK_FALSE(reduce_numbers(n, Reduce::kOnly));  // three numbers where one was meant: not a value
  CHECK(*reduce_numbers({7}, Reduce::kOnly) == 7);
  CHECK(*reduce_numbers(n, Reduce::kFirst) == 3);
  CHECK(*reduce_numbers(n, Reduce::kLast) == 2);
  CHECK(*reduce_numbers(n, Reduce::kMin) == 1);
  CHECK(*reduce_numbers(n, Reduce::kMax) == 3);
  CHECK(*reduce_numbers(n, Reduce::kSum) == 6);
  CHECK(*reduce_numbers(n, Reduce::kMean) == 2);
  CHECK(*reduce_numbers({}, Reduce::kCount) == 0);
  CHECK_FALSE(reduce_numbers({}, Reduce::kMax));
  CHECK(median({5, 1, 3}) == 3);
  CHECK(median({4, 1, 3, 2}) == 2.5);
  const BenchSpec s = spec_of(R"({"about": "d", "variants": [{"name": "v", "command": ["x"]}], "readings": [
    {"name": "a", "wall": true}, {"name": "b", "wall": true}, {"name": "d", "derived": "a - b", "scale": 1000}]})");
  Reading d = *s.reading("d");
  CHECK(*derive(d, {{"a", 2.5}, {"b", 0.5}}) == 2000);
  d.expr = "a / b";
  CHECK_FALSE(derive(d, {{"a", 1}, {"b", 0}}));  // no division by zero
  CHECK_FALSE(derive(d, {{"a", 1}}));
  // Precedence, parentheses, unary minus, numbers in exponent form.
  d.expr = "(a + 2 * b) * 1e-3 / -(b - 3)", d.scale = 1;
  CHECK(*derive(d, {{"a", 4}, {"b", 1}}) == Approx(0.003));
  CHECK(expression_names("(calls * ns + (3 + 2 * ga) * ns_phase) / step_s") ==
        std::vector<std::string>{"calls", "ns", "ga", "ns_phase", "step_s"});
}

TEST_CASE("bench figures: ratios per round, their median, checks and #wrong", "[bench-harness]") {
  const BenchSpec s = two_variants();
  const Figures f = compute_figures(s, rows_of({{1, "fast", 1.0}, {1, "det", 1.05}, {2, "det", 1.30}, {2, "fast", 1.0},
                                                {3, "fast", 2.0}, {3, "det", 2.10}}));
  CHECK(f.columns == std::vector<std::string>{"step_s", "bytes", "det/fast"});
  REQUIRE(f.rows.size() == 6);
  CHECK(f.rows[1].variant == "det");  // round by round, variants in the spec's order
  CHECK(*f.rows[1].cells[2] == Approx(1.05));
  CHECK(*f.rows[3].cells[2] == Approx(1.30));
  CHECK_FALSE(f.rows[0].expected[2]);  // the baseline has no ratio to itself
  CHECK_FALSE(f.rows[0].expected[1]);  // nor the det-only reading
  REQUIRE(f.medians.size() == 2);
  CHECK(*f.medians[0].cells[0] == 1.0);
  CHECK(*f.medians[1].cells[0] == Approx(1.30));
  CHECK(*f.medians[1].cells[2] == Approx(1.05));  // the median of 1.05, 1.30, 1.05: not a ratio of medians
  REQUIRE(f.checks.size() == 1);
  CHECK(f.checks[0].ok);
  CHECK(f.wrong == 0);

  // The bound broken on the medians line, and a missing value in one round: two wrong.
  auto rows = rows_of({{1, "fast", 1.0}, {1, "det", 1.2}, {2, "fast", 1.0}, {2, "det", 1.3}});
  rows[3].values.erase("bytes");
  const Figures g = compute_figures(s, rows);
  CHECK_FALSE(g.checks[0].ok);
  CHECK(g.rows[3].wrong == 1);
  CHECK(g.medians[1].wrong == 1);
  CHECK(g.wrong == 2);
}

TEST_CASE("bench figures: a ratio to a variant that did not run is no column, not a wrong value", "[bench-harness]") {
  const BenchSpec s = two_variants();
  const Figures f = compute_figures(s, rows_of({{1, "det", 1.2}}));  // fast's `when` option unset, say
  REQUIRE(f.rows.size() == 1);
  CHECK_FALSE(f.rows[0].expected[2]);
  CHECK(f.checks.empty());  // the medians line has no det/fast to bound either
  CHECK(f.wrong == 0);
}

TEST_CASE("bench figures: a ratio over another reading of the baseline (ours over the peer's)", "[bench-harness]") {
  const BenchSpec s = spec_of(R"({"about": "p", "variants": [{"name": "ours", "command": ["x"]}, {"name": "peer", "command": ["y"]}],
    "readings": [{"name": "tok_s", "pointer": "/a", "variants": ["ours"]}, {"name": "peer_tok_s", "pointer": "/b", "variants": ["peer"]}],
    "ratios": [{"name": "x_peer", "reading": "tok_s", "baseline": "peer", "over": "peer_tok_s"}]})");
  const Figures f = compute_figures(s, {RunRow{1, "ours", {{"tok_s", 300}}}, RunRow{1, "peer", {{"peer_tok_s", 200}}}});
  CHECK(*f.rows[0].cells[2] == Approx(1.5));
  CHECK(f.wrong == 0);
}

TEST_CASE("bench figures: a check on every round counts each row out of bounds", "[bench-harness]") {
  BenchSpec s = two_variants();
  s.checks = {Check{"step_s", {"det"}, 1.0, std::nullopt, true}};
  const Figures f = compute_figures(s, rows_of({{1, "fast", 0.5}, {1, "det", 1.5}, {2, "fast", 0.5}, {2, "det", 0.5}}));
  REQUIRE(f.checks.size() == 2);  // det's two rows only: the check names det
  CHECK(f.checks[0].ok);
  CHECK_FALSE(f.checks[1].ok);
  CHECK(f.checks[1].round == 2);
  CHECK(f.wrong == 1);
}

TEST_CASE("bench figures: the table and the JSON show the same rows, medians and checks", "[bench-harness]") {
  const BenchSpec s = two_variants();
  auto rows = rows_of({{1, "fast", 0.0125}, {1, "det", 0.0150}});
  rows[1].values["bytes"] = 1.5e9;
  const Figures f = compute_figures(s, rows);
  const std::string table = format_table(s, f);
  INFO(table);
  CHECK(table.find("# t.json: a\n") == 0);
  CHECK(table.find("#  round  variant      step_s       bytes    det/fast  #wrong\n") != std::string::npos);
  CHECK(table.find("       1  fast         0.0125           -           -       0\n") != std::string::npos);
  CHECK(table.find("       1  det           0.015  1500000000       1.200       0\n") != std::string::npos);
  CHECK(table.find("  median  det           0.015  1500000000       1.200       1\n") != std::string::npos);
  CHECK(table.find("# check det/fast of det (median): 1.200, bound <= 1.100: WRONG\n") != std::string::npos);
  CHECK(table.find("# wrong: 1 (values out of a check's bounds or missing)\n") != std::string::npos);
  const nlohmann::json j = figures_json(s, f);
  CHECK(j["format"] == "shardtrain-compare");
  CHECK(j["wrong"] == 1);
  CHECK(j["rows"][1]["round"] == 1);
  CHECK(j["rows"][1]["values"]["det/fast"].get<double>() == Approx(1.2));
  CHECK_FALSE(j["rows"][0]["values"].contains("det/fast"));
  CHECK(j["medians"][1]["variant"] == "det");
  CHECK_FALSE(j["medians"][1].contains("round"));
  CHECK(j["checks"][0]["round"] == "median");
  CHECK(j["checks"][0]["ok"] == false);
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST_CASE("bench readings: JSON pointers, JSON lines with where, a log by regex, bytes, wall time", "[bench-harness]") {
  const std::string run = test::temp_dir("bench-readings");
  write(run + "/summary.json", R"({"tp": 5000, "by_rank": [0.25, 0.75], "text": "x"})");
  write(run + "/steps.rank0.jsonl", "{\"step\": 0, \"time\": 10.5, \"step_s\": 1}\n\n{\"step\": 1, \"time\": 12.5, \"step_s\": 3}\n");
  write(run + "/restarts.json", R"({"restarts": [{"first": 12.5}]})");
  write(run + "/out.log", "verdict attempt 1: diagnosed in 4.25 s\nverdict attempt 2: diagnosed in 5.75 s\n");
  const BenchSpec s = spec_of(R"({"about": "r", "variants": [{"name": "v", "command": ["x"]}], "readings": [
    {"name": "tp", "pointer": "/tp", "scale": 0.001},
    {"name": "worst", "pointer": "/by_rank", "reduce": "max"},
    {"name": "text", "pointer": "/text"},
    {"name": "gone", "pointer": "/tp", "file": "nowhere.json"},
    {"name": "first", "pointer": "/restarts/0/first", "file": "restarts.json"},
    {"name": "resumed_step_s", "pointer": "/*/step_s", "file": "steps.rank0.jsonl", "where": {"pointer": "/time", "equals": "first"}},
    {"name": "mean_step_s", "pointer": "/*/step_s", "file": "steps.rank0.jsonl", "reduce": "mean"},
    {"name": "diagnosed_s", "regex": "diagnosed in ([0-9.]+) s", "file": "out.log", "reduce": "last"},
    {"name": "verdicts", "regex": "verdict attempt", "file": "{run}/../out.log", "reduce": "count"},
    {"name": "bytes", "bytes": "."},
    {"name": "wall_s", "wall": true}]})");
  const Places places = places_for(s, "/b", "/d", run, 1, "v");  // {run} = RUN/r1/v
  std::map<std::string, double> row;
  auto read = [&](const std::string& name) {
    auto v = read_reading(*s.reading(name), places, run, 2.5, row);
    if (v) row[name] = *v;
    return v;
  };
  CHECK(*read("tp") == 5);
  CHECK(*read("worst") == 0.75);
  CHECK_FALSE(read("text"));  // not a number: missing, not an exception
  CHECK_FALSE(read("gone"));
  CHECK(*read("first") == 12.5);
  CHECK(*read("resumed_step_s") == 3);
  CHECK(*read("mean_step_s") == 2);
  CHECK(*read("diagnosed_s") == 5.75);
  CHECK_FALSE(read("verdicts"));  // RUN/r1/v/../out.log does not exist: the folder was never made
  CHECK(*read("bytes") > 100);
  CHECK(*read("wall_s") == 2.5);
}

}  // namespace
}  // namespace shardtrain::bench
