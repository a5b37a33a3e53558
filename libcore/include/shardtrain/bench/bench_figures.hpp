// The figures of a benchmark declared by a spec (bench_spec.hpp), from the numbers its runs gave:
// per round and variant one row of readings and ratios, then per variant the medians line, the
// checks, and the count of wrong values (nccl-tests' #wrong: a value out of a check's bounds or a
// value a row should have and does not). One table format for every benchmark, and the same
// figures as JSON. Pure: no file, no process.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/bench/bench_spec.hpp"

namespace shardtrain::bench {

// What one variant's run in one round gave: the readings found (a reading that found nothing is
// absent), in the reading's unit after its scale.
struct RunRow {
  int round = 0;  // 1-based
  std::string variant;
  std::map<std::string, double> values;
};

// One line of the table: a round's row (round >= 1) or a variant's medians line (round 0). cells
// follows Figures::columns; a cell is empty where the variant has no such column or the value is
// missing (expected tells which).
struct TableLine {
  int round = 0;
  std::string variant;
  std::vector<std::optional<double>> cells;
  std::vector<bool> expected;
  int wrong = 0;
};

struct CheckOutcome {
  std::string column, variant;
  int round = 0;  // 0: the medians line
  std::optional<double> value, min, max;
  bool ok = false;
};

struct Figures {
  std::vector<std::string> columns;  // shown readings, then ratios, in spec order
  std::vector<TableLine> rows;       // round by round, variants in the spec's order
  std::vector<TableLine> medians;    // one per variant that ran
  std::vector<CheckOutcome> checks;
  int wrong = 0;                     // the sum of every line's wrong
};

// The numbers one reading found -> its value. kOnly: exactly one number; kCount: how many; the
// others need at least one. Nothing when the rule is not met.
std::optional<double> reduce_numbers(const std::vector<double>& numbers, Reduce reduce);

// A derived reading's value in a row (its expression, then scale); nothing when an operand is
// missing or a division is by zero.
std::optional<double> derive(const Reading& reading, const std::map<std::string, double>& values);

// The median (the mean of the middle two for an even count); the list must not be empty.
double median(std::vector<double> values);

// Does `variant` have `column` (a shown reading or a ratio) in its rows?
bool has_column(const BenchSpec& spec, const std::string& column, const std::string& variant);

// Rows (any order) -> the table's lines, ratios in each round (variant / baseline of the same
// round), medians (a ratio's median is the median of its per-round ratios: pairs run side by side
// cancel the machine's drift), checks and wrong counts.
Figures compute_figures(const BenchSpec& spec, const std::vector<RunRow>& rows);

// The table: "# " title lines, a header, one line per row, the medians lines, one "# check" line
// per check outcome and the "# wrong" total. Numbers: whole above 1000 or when integral (counts),
// 3 decimals above 1, else 4 significant digits; "-" for a column the variant does not have, "missing" for a missing value.
std::string format_table(const BenchSpec& spec, const Figures& figures);

// The same as JSON (format "shardtrain-compare"): options, columns, rows and medians with their
// values by column (null: missing), checks, wrong.
nlohmann::json figures_json(const BenchSpec& spec, const Figures& figures);

}  // namespace shardtrain::bench
