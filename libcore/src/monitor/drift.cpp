// Drift of the matured documents (drift.hpp).
#include "shardtrain/monitor/drift.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/data/dataset.hpp"
#include "shardtrain/data/selection.hpp"

namespace shardtrain {
namespace {

double entropy_bits(const std::vector<double>& p) {
  double h = 0;
  for (const double x : p)
    if (x > 0) h -= x * std::log2(x);
  return h;
}

std::vector<double> normalised(const std::vector<double>& counts, const char* which) {
  double total = 0;
  for (const double c : counts) {
    if (!(c >= 0) || !std::isfinite(c))
      throw UsageError(std::string("Jensen-Shannon divergence: a count of ") + which + " is negative or not finite");
    total += c;
  }
  if (!(total > 0)) throw UsageError(std::string("Jensen-Shannon divergence: ") + which + " has no count (sums to 0)");
  std::vector<double> p(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) p[i] = counts[i] / total;
  return p;
}

}  // namespace

double jensen_shannon_divergence(const std::vector<double>& p_counts, const std::vector<double>& q_counts) {
  if (p_counts.size() != q_counts.size())
    throw UsageError("Jensen-Shannon divergence: the distributions have " + std::to_string(p_counts.size()) + " and " +
                     std::to_string(q_counts.size()) + " classes");
  const std::vector<double> p = normalised(p_counts, "the first distribution"),
                            q = normalised(q_counts, "the second distribution");
  std::vector<double> m(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) m[i] = 0.5 * (p[i] + q[i]);
  // Clamped: rounding can leave a value a few ulps outside [0, 1].
  return std::clamp(entropy_bits(m) - 0.5 * (entropy_bits(p) + entropy_bits(q)), 0.0, 1.0);
}

TokenCounts selection_token_counts(const std::string& data_path, const std::string& cutoff, bool holdout) {
  if (!std::filesystem::exists(data_path))
    throw IoError(data_path + ": no such dataset (prepare it with data-prep, or name the right file)");
  const auto reader = data::DatasetReader::open(data_path);
  std::optional<std::int64_t> c;
  if (!cutoff.empty()) c = parse_rfc3339(cutoff, "cutoff");
  const data::Selection s = data::select_documents(reader.documents(), c, c);
  TokenCounts out;
  out.counts.assign(std::size_t(reader.header().vocab), 0.0);
  for (const std::size_t index : holdout ? s.holdout : s.train) {
    for (const std::uint32_t t : reader.read_document(index)) out.counts[t] += 1;
    out.tokens += reader.documents()[index].length;
    ++out.documents;
  }
  return out;
}

}  // namespace shardtrain
