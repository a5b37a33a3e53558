// Strict numbers on every tool's command line (issue 50). CLI11 2.1 converts leniently: integers
// with strtoll/strtoull in base 0 ("010" reads as 8, "0x10" as 16), one past 64 bits clamped to the
// largest ("--steps 9223372036854775808" ran as 2^63 - 1), "-1" for an unsigned option wrapped to
// 2^64 - 1, and floats through strtold, so "nan", "inf" and "1e400" pass. run_tool gives every
// option whose type is INT, UINT or FLOAT a check on the text, before that conversion, which
// refuses with one line naming the option and what it takes:
//   * INT / UINT: a plain decimal whole number (no leading 0, no base prefix) within 64 bits;
//   * FLOAT: a finite number;
//   * any: a negative value, unless the option is marked with allow_negative() (no tool option
//     takes one today: a negative count, size, rate or time is never meant).
// Ranges of their own (CLI11's validators, the tools' checks) still apply after these.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

namespace shardtrain {

// Adds the checks to every INT, UINT and FLOAT option of `app` and of its subcommands, at any depth.
void check_numbers_strictly(CLI::App& app);

// Marks a numeric option as taking negative values (before check_numbers_strictly runs).
CLI::Option* allow_negative(CLI::Option* option);

// The check itself, for a value given as `text` to an option of CLI11 type name `type` ("INT",
// "UINT" or "FLOAT"): "" when acceptable, else why not (without the option's name).
std::string strict_number_problem(const std::string& text, const std::string& type, bool negative_ok);

}  // namespace shardtrain
