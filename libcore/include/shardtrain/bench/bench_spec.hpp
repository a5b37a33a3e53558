// A benchmark declared as data (`scale-bench compare SPEC`; the specs live in bench/specs/, their
// format is scale-bench(1) "compare"): the variants to run side by side, in rounds, what to read
// from each run, the ratios to a baseline variant, and the checks that count a figure as wrong.
// This header is the typed spec, its reader and its placeholder expansion; all pure (no process
// is started, no file but the spec is read). bench_figures.hpp computes the figures,
// bench_runner.hpp runs the commands.
//
// Placeholders: "{NAME}" anywhere in a command, a setup step, a reading's file or an argument list
// is replaced by a value: the built-ins bin (the tools' folder), data (the data folder), work (the
// scratch folder), cwd (the folder compare started in), spec_dir (the spec file's folder), round (1-based), run (this variant's run
// folder in this round), log (its output log), run:VARIANT (another variant's run folder in the same round), and every option of the
// spec ("options", overridable by --set KEY=VALUE). An argument that is exactly "@NAME" (after
// expansion, so "@{model}" picks a list by an option) is replaced by the spec's argument list NAME
// (whose own "@" arguments are replaced in turn). "include": [FILE...] merges shared options,
// argument lists and environment from files beside the spec (bench/specs/include/common.json).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/base/json_file.hpp"

namespace shardtrain::bench {

// SIGKILL the process that writes a step log (its records carry "pid") once it logged a step >=
// after_step: a rank lost in the middle of a run, for the restart benchmarks. Once per run.
struct KillRule {
  std::string file;        // the step log, placeholders allowed ("{run}/run/steps.rank1.jsonl")
  long long after_step = 0;
};

struct Variant {
  std::string name;
  std::vector<std::string> command;  // argv, unexpanded; no shell unless the command names one
  std::string when;                  // an option: the variant runs only when it is non-empty ("" = always)
  std::vector<int> exit_ok{0};       // exit statuses that are a run (a planted hang's launcher exits 1)
  std::optional<KillRule> kill;
  std::vector<std::string> cleanup;  // argv run after the readings (a gigabyte checkpoint removed); may be empty
  double timeout_s = 3600;           // the command (all its processes) is ended after this many seconds
};

// How several numbers that one reading found become its value. kOnly: exactly one, else missing.
enum class Reduce { kOnly, kFirst, kLast, kMin, kMax, kSum, kMean, kCount };

enum class ReadingKind {
  kJson,     // numbers at a JSON pointer of a file (.jsonl: an array of its records); one "*" segment
             // takes every element there
  kRegex,    // group 1 of every match of a regular expression in a text file, as numbers
  kWall,     // the wall-clock seconds of the variant's command, measured by the runner
  kBytes,    // the total bytes of the regular files under a path (a checkpoint folder)
  kDerived,  // an expression of readings read before it in the same row (bench_expr.hpp)
};

// Of the records a "*" pointer takes, only those whose field `pointer` equals the reading named
// `equals`, read earlier in the same row (the step record of the first resumed step).
struct Where {
  std::string pointer;
  std::string equals;
};

struct Reading {
  std::string name;
  ReadingKind kind = ReadingKind::kJson;
  std::string file;                   // kJson, kRegex, kBytes: relative to the run folder unless absolute
  std::string pointer;                // kJson
  std::string regex;                  // kRegex (ECMAScript)
  Reduce reduce = Reduce::kOnly;
  std::optional<Where> where;         // kJson with "*"
  std::string expr;                   // kDerived
  double scale = 1;                   // the value is multiplied by it (ms: 1000; GB: 1e-9)
  std::vector<std::string> variants;  // the variants that have it; empty: all
  bool shown = true;                  // false: an input of other readings, not a column
};

// name = `reading` of each variant / `over` (default: the same reading) of `baseline` in the same
// round, x scale.
struct Ratio {
  std::string name, reading, baseline, over;
  std::vector<std::string> variants;  // empty: every variant but the baseline
  double scale = 1;
};

// A bound on a column (a reading or a ratio): on the medians line, or with every_round on each
// round's row. A value out of bounds, or missing where the check applies, is one wrong.
struct Check {
  std::string column;
  std::vector<std::string> variants;  // empty: every variant that has the column
  std::optional<double> min, max;
  bool every_round = false;
};

struct SetupStep {
  std::vector<std::string> command;
  std::string when;  // as Variant::when
};

struct BenchSpec {
  std::string path;   // the spec file, for messages
  std::string about;  // one line: what is compared
  int rounds = 1;
  bool alternate = false;  // even rounds run the variants in reverse order (drift favours neither side)
  std::map<std::string, std::string> options;                 // defaults; --set overrides
  std::map<std::string, std::vector<std::string>> arg_lists;  // "@NAME"
  std::map<std::string, std::string> env;                     // set for every command (unexpanded)
  std::vector<SetupStep> setup;
  std::vector<Variant> variants;
  std::vector<Reading> readings;
  std::vector<Ratio> ratios;
  std::vector<Check> checks;

  const Variant* variant(const std::string& name) const;
  const Reading* reading(const std::string& name) const;
};

// Reads and checks a spec: unknown fields, a reading or variant named twice, a ratio, check or
// derived reading naming nothing, an unknown placeholder: UsageError "PATH: the benchmark spec
// field /variants/1/command/3: ..." (one line, exit 2); a missing file: IoError.
BenchSpec read_bench_spec(const std::string& path);
BenchSpec parse_bench_spec(const JsonFile& file);

// --set KEY=VALUE: the option KEY of the spec takes VALUE. UsageError for an unknown KEY or no '='.
void apply_setting(BenchSpec& spec, const std::string& key_value);

// The values of the placeholders for one command (built-ins and options together).
using Places = std::map<std::string, std::string>;

// Places for variant `variant` in round `round` (1-based): bin, data, work, cwd, spec_dir, round, run, log,
// run:NAME for every variant, and the options. Run folders are WORK/rROUND/VARIANT.
Places places_for(const BenchSpec& spec, const std::string& bin, const std::string& data, const std::string& work,
                  int round, const std::string& variant);

// `text` with every "{NAME}" replaced; UsageError naming `where` for a name not in `places`.
std::string expand(const std::string& text, const Places& places, const std::string& where);

// A command's argv expanded, "@NAME" arguments spliced from the spec's argument lists (expanded
// in turn). `where` names the field for errors.
std::vector<std::string> expand_command(const BenchSpec& spec, const std::vector<std::string>& command,
                                        const Places& places, const std::string& where);

// The variants that run in `round` (those whose `when` option is set), in the round's order.
std::vector<const Variant*> round_order(const BenchSpec& spec, int round);

}  // namespace shardtrain::bench
