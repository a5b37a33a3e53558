// Every tool's numeric options are read strictly (tool/numbers.hpp, issue 50): CLI11 2.1 alone
// clamps an integer past 64 bits, wraps -1 for an unsigned option, reads "010" as octal and lets
// nan and inf through to a float. Checked here on a CLI::App of each type through run_tool, the
// shared main (the option sweep, tests/scripts/option_sweep.py, runs the real tools).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/tool/numbers.hpp"
#include "shardtrain/tool/tool.hpp"

namespace {

struct Parsed {
  int status = -1;
  std::int64_t i = 7;
  std::uint64_t u = 7;
  double f = 7;
  double signed_f = 7;
};

// Runs a small tool with one option of each kind given `args`; the body does nothing.
Parsed parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App app{"numbers"};
  app.add_option("--i", p.i);
  app.add_option("--u", p.u);
  app.add_option("--f", p.f);
  shardtrain::allow_negative(app.add_option("--signed-f", p.signed_f));
  CLI::App* sub = app.add_subcommand("sub");
  sub->add_option("--deep", p.i);
  args.insert(args.begin(), "numbers");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  p.status = shardtrain::run_tool(app, int(argv.size()), argv.data(), {}, [] { return 0; });
  return p;
}

}  // namespace

TEST_CASE("tool numbers: whole numbers are plain decimals within 64 bits, never clamped or wrapped", "[tools][cli]") {
  CHECK(parse({"--i", "42"}).i == 42);
  CHECK(parse({"--i", "0"}).status == 0);
  CHECK(parse({"--u", "18446744073709551615"}).u == UINT64_MAX);
  CHECK(parse({"--i", "9223372036854775807"}).i == INT64_MAX);
  for (const char* bad : {"9223372036854775808", "-1", "010", "0x10", "1e18", "nan", "twelve", "", "4 2"}) {
    INFO(bad);
    CHECK(parse({"--i", bad}).status == 2);
    CHECK(parse({"sub", "--deep", bad}).status == 2);  // subcommands' options too
  }
  for (const char* bad : {"-1", "18446744073709551616", "-0x1"}) {
    INFO(bad);
    CHECK(parse({"--u", bad}).status == 2);
  }
  CHECK(shardtrain::strict_number_problem("9223372036854775808", "INT", false) ==
        "'9223372036854775808' is out of range; give a whole number within 64 bits, at least 0");
  CHECK(shardtrain::strict_number_problem("-1", "UINT", false) ==
        "'-1' is negative; give a whole number from 0 to 18446744073709551615");
  CHECK(shardtrain::strict_number_problem("-5", "INT", true).empty());
  CHECK(shardtrain::strict_number_problem("-0", "INT", false).empty());
}

TEST_CASE("tool numbers: floats are finite and at least 0 unless an option takes negatives", "[tools][cli]") {
  CHECK(parse({"--f", "1e-3"}).f == 1e-3);
  CHECK(parse({"--f", "0"}).status == 0);
  for (const char* bad : {"nan", "inf", "-inf", "1e400", "-1", "-0.5", "1.5x", ""}) {
    INFO(bad);
    CHECK(parse({"--f", bad}).status == 2);
  }
  CHECK(parse({"--signed-f", "-0.5"}).signed_f == -0.5);
  CHECK(parse({"--signed-f", "nan"}).status == 2);  // finite still
  CHECK(shardtrain::strict_number_problem("nan", "FLOAT", true) == "'nan' is not a finite number");
}
