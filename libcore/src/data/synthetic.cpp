// Seeded random Markov source with an exactly computed entropy rate (synthetic.hpp).
#include "shardtrain/data/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "shardtrain/data/dataset.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"

namespace shardtrain::data {

namespace {
// splitmix64 generator.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
 private:
  uint64_t state_;
};
// The first position whose running sum exceeds u (the last one if rounding left u above them all).
std::size_t draw(const double* cumulative, std::size_t n, double u) {
  for (std::size_t j = 0; j + 1 < n; ++j)
    if (u < cumulative[j]) return j;
  return n - 1;
}
}  // namespace

double SparseChain::transition(int i, int j) const {
  const auto first = successor.begin() + std::ptrdiff_t(row_begin[i]);
  const auto last = successor.begin() + std::ptrdiff_t(row_begin[i + 1]);
  const auto at = std::lower_bound(first, last, uint32_t(j));
  return at != last && *at == uint32_t(j) ? probability[std::size_t(at - successor.begin())] : 0.0;
}

// Power iteration pi <- pi P until the L1 change is below 1e-15. For each state j the products
// pi_i P_ij are added in ascending i, as a dense loop over i would add them (its zero terms add
// nothing), so the stationary distribution and the entropy do not depend on the representation.
double markov_entropy_rate(const SparseChain& chain, std::vector<double>* stationary) {
  const std::size_t n = std::size_t(chain.states);
  std::vector<double> pi(n, 1.0 / double(n)), next(n);
  for (int it = 0; it < 1000000; ++it) {
    std::fill(next.begin(), next.end(), 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t at = chain.row_begin[i]; at < chain.row_begin[i + 1]; ++at)
        next[chain.successor[at]] += pi[i] * chain.probability[at];
    double change = 0.0;
    for (std::size_t j = 0; j < n; ++j) change += std::fabs(next[j] - pi[j]);
    pi.swap(next);
    if (change < 1e-15) break;
  }
  double h = 0.0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t at = chain.row_begin[i]; at < chain.row_begin[i + 1]; ++at) {
      const double p = chain.probability[at];
      if (p > 0) h -= pi[i] * p * std::log(p);
    }
  if (stationary) *stationary = std::move(pi);
  return h;
}

double markov_entropy_rate(const std::vector<double>& P, int n, std::vector<double>* stationary) {
  SparseChain chain;
  chain.states = n;
  chain.row_begin.push_back(0);
  for (std::size_t i = 0; i < std::size_t(n); ++i) {
    for (std::size_t j = 0; j < std::size_t(n); ++j)
      if (P[i * std::size_t(n) + j] != 0) {
        chain.successor.push_back(uint32_t(j));
        chain.probability.push_back(P[i * std::size_t(n) + j]);
      }
    chain.row_begin.push_back(chain.successor.size());
  }
  return markov_entropy_rate(chain, stationary);
}

MarkovSource::MarkovSource(const MarkovOptions& o) : options_(o) {
  const int n = o.symbols;
  if (n < 2 || n > kMaxMarkovSymbols)
    throw UsageError("synthetic: --symbols must be in [2, " + std::to_string(kMaxMarkovSymbols) + "], got " +
                     std::to_string(n));
  const int max_extra = std::min(n - 1, kMaxMarkovExtraSuccessors);
  if (o.extra_successors < 0 || o.extra_successors > max_extra)
    throw UsageError("synthetic: --successors must be in [0, " + std::to_string(max_extra) + "], got " +
                     std::to_string(o.extra_successors));
  if (o.documents < 1 || o.tokens_per_document < 1)
    throw UsageError("synthetic: documents and tokens per document must be at least 1");
  // Row i: support {i+1 mod n} (and the self-loop of state 0) plus extra_successors random draws,
  // duplicates merged; weights drawn in ascending successor order, so the chain a seed gives is the
  // one the dense generator of earlier versions gave.
  SplitMix rng(mix64(o.seed ^ 0x4d41524b4f56ULL));
  chain_.states = n;
  chain_.row_begin.reserve(std::size_t(n) + 1);
  chain_.row_begin.push_back(0);
  std::vector<uint32_t> support;
  for (int i = 0; i < n; ++i) {
    support.assign(1, uint32_t((i + 1) % n));
    if (i == 0) support.push_back(0);
    for (int k = 0; k < o.extra_successors; ++k) support.push_back(uint32_t(rng.next() % uint64_t(n)));
    std::sort(support.begin(), support.end());
    support.erase(std::unique(support.begin(), support.end()), support.end());
    const std::size_t first = chain_.successor.size();
    double sum = 0.0;
    for (uint32_t j : support) {
      chain_.successor.push_back(j);
      chain_.probability.push_back(-std::log(1.0 - rng.uniform()) + 1e-12);
      sum += chain_.probability.back();
    }
    for (std::size_t at = first; at < chain_.successor.size(); ++at) chain_.probability[at] /= sum;
    chain_.row_begin.push_back(chain_.successor.size());
  }
  entropy_ = markov_entropy_rate(chain_, &pi_);
  cumulative_.resize(chain_.probability.size());
  for (int i = 0; i < n; ++i) {
    double c = 0.0;
    for (std::size_t at = chain_.row_begin[i]; at < chain_.row_begin[i + 1]; ++at)
      cumulative_[at] = (c += chain_.probability[at]);
  }
  pi_cumulative_.resize(std::size_t(n));
  double c = 0.0;
  for (int j = 0; j < n; ++j) pi_cumulative_[std::size_t(j)] = (c += pi_[std::size_t(j)]);
}

std::vector<uint32_t> MarkovSource::document(uint64_t k) const {
  SplitMix rng(mix64(mix64(options_.seed) + 0x9e3779b97f4a7c15ULL * (k + 1)));
  std::vector<uint32_t> out(options_.tokens_per_document);
  // The first state from pi: a binary search (the running sums ascend), as the linear scan would find.
  const double u0 = rng.uniform();
  const auto first = std::upper_bound(pi_cumulative_.begin(), pi_cumulative_.end() - 1, u0);
  std::size_t state = std::size_t(first - pi_cumulative_.begin());
  out[0] = uint32_t(state);
  for (std::size_t t = 1; t < out.size(); ++t) {
    const std::size_t begin = chain_.row_begin[state], count = chain_.row_begin[state + 1] - begin;
    state = chain_.successor[begin + draw(cumulative_.data() + begin, count, rng.uniform())];
    out[t] = uint32_t(state);
  }
  return out;
}

namespace {
std::string doc_id(uint64_t k) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "markov-%05llu", (unsigned long long)k);
  return buf;
}
nlohmann::json spec_json(const MarkovOptions& o) {
  return {{"generator", "markov"}, {"symbols", o.symbols}, {"extra_successors", o.extra_successors},
          {"seed", o.seed}, {"documents", o.documents}, {"tokens_per_document", o.tokens_per_document}};
}
}  // namespace

MarkovCorpus write_markov_dataset(const std::string& path, const MarkovOptions& o) {
  MarkovSource source(o);
  DatasetWriter writer(path, o.symbols + 1, "markov" + std::to_string(o.symbols), o.symbols);
  for (uint64_t k = 0; k < o.documents; ++k) {
    auto tokens = source.document(k);
    int64_t event = kSyntheticEpoch + int64_t(k) * 86400;
    writer.add_document(doc_id(k), 1, event, event + 3600, k % 2 == 0 ? "markov-a" : "markov-b",
                        std::span<const uint32_t>(tokens));
  }
  writer.set_double_attribute("entropy_nats_per_token", source.entropy_nats_per_token());
  writer.set_string_attribute("synthetic_spec", spec_json(o).dump());
  DatasetHeader h = writer.finish();
  return {path, o, h.num_documents, h.num_tokens, h.vocab, h.separator_token, source.entropy_nats_per_token(),
          h.snapshot_id};
}

MarkovCorpus write_markov_jsonl(const std::string& path, const MarkovOptions& o) {
  MarkovSource source(o);
  std::ofstream out(path, std::ios::binary);
  if (!out) throw IoError("cannot write " + path);
  uint64_t tokens = 0;
  for (uint64_t k = 0; k < o.documents; ++k) {
    auto doc = source.document(k);
    int64_t event = kSyntheticEpoch + int64_t(k) * 86400;
    nlohmann::json j = {{"id", doc_id(k)}, {"version", 1}, {"owner", k % 2 == 0 ? "markov-a" : "markov-b"},
                        {"event_time", format_rfc3339(event)}, {"available_time", format_rfc3339(event + 3600)},
                        {"tokens", doc}};
    out << j.dump() << '\n';
    tokens += doc.size();
  }
  out.close();
  if (!out) throw IoError("cannot write " + path + " (disk full?)");
  return {path, o, o.documents, tokens, o.symbols + 1, o.symbols, source.entropy_nats_per_token(), std::nullopt};
}

nlohmann::json MarkovCorpus::to_json() const {
  nlohmann::json j = {{"output", output},
                      {"synthetic", spec_json(spec)},
                      {"documents", documents},
                      {"tokens", tokens},
                      {"vocab", vocab},
                      {"separator_token", separator_token},
                      {"entropy_nats_per_token", entropy_nats_per_token}};
  if (snapshot_id) j["snapshot_id"] = *snapshot_id;
  return j;
}

}  // namespace shardtrain::data
