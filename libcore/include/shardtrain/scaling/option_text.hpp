// The text forms of scale-bench's list and size options, parsed once: each refusal is a
// UsageError naming the option (`what`) and the text.
#pragma once
#include <string>
#include <vector>

#include "shardtrain/stepmodel/two_level.hpp"

namespace shardtrain::scaling {

// "1,2,4,8" -> {1, 2, 4, 8}; UsageError naming `what` on an empty list, a non-number or a value < 1.
std::vector<int> parse_workers(const std::string& text, const std::string& what = "--workers");

// "8e9", "8GB" (10^9), "80GiB" (2^30), ... -> bytes; UsageError naming `what` unless > 0.
double parse_bytes(const std::string& text, const std::string& what);

// "2x2,3x1" -> {{2, 2}, {3, 1}}; UsageError naming `what` otherwise.
std::vector<Topology> parse_topologies(const std::string& text, const std::string& what = "--topology");

}  // namespace shardtrain::scaling
