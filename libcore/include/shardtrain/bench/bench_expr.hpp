// The arithmetic of a derived reading (bench_spec.hpp, "expr"): numbers, the names of readings
// read before it in the same row, + - * /, unary minus and parentheses, with the usual
// precedence. E.g. "(calls * ns_collective + (3 + 2 * grad_accum) * ns_phase) * 1e-9 / step_s".
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::bench {

// The reading names `expr` uses, in order of appearance. UsageError "EXPR: ..." naming the
// position for a syntax error (so a spec is refused when it is read, not mid-benchmark).
std::vector<std::string> expression_names(const std::string& expr);

// The value of `expr` with `values` for its names; nothing when a name has no value or a
// division is by zero (the reading is then missing, as a file that was not written).
std::optional<double> evaluate(const std::string& expr, const std::map<std::string, double>& values);

}  // namespace shardtrain::bench
