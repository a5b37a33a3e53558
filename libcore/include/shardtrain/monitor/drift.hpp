// How far the documents that matured after a release drift from its training selection: token
// counts of a selection (data/selection.hpp) and the Jensen-Shannon divergence between two of
// them. The monitor's input-quality evidence (monitor.hpp) and the rollback rules' "drift" check.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain {

// Jensen-Shannon divergence of two distributions given as non-negative counts over the same
// classes (normalised here): JSD = H(M) - (H(P) + H(Q)) / 2 with M = (P + Q) / 2 and H in bits
// (log base 2), so 0 <= JSD <= 1; 0 * log 0 = 0. Throws UsageError when the lengths differ, a
// count is negative or not finite, or either side sums to 0.
double jensen_shannon_divergence(const std::vector<double>& p, const std::vector<double>& q);

// Token counts of selected documents (separators not counted): per token id in [0, vocab).
struct TokenCounts {
  std::vector<double> counts;
  std::uint64_t documents = 0, tokens = 0;
};
// The documents data/selection.hpp selects from `data_path`: the training selection (available by
// `cutoff`; every document when cutoff is "") or, with holdout set, the hold-out after `cutoff`.
// Throws IoError / UsageError naming the file.
TokenCounts selection_token_counts(const std::string& data_path, const std::string& cutoff, bool holdout);

}  // namespace shardtrain
