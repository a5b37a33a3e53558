// Seeded random Markov source with an exactly computed entropy rate (synthetic.hpp).
#include "shardtrain/data/synthetic.hpp"

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
int draw(const double* cumulative, int n, double u) {
  for (int j = 0; j < n - 1; ++j)
    if (u < cumulative[j]) return j;
  return n - 1;
}
}  // namespace

double markov_entropy_rate(const std::vector<double>& P, int n, std::vector<double>* stationary) {
  std::vector<double> pi(n, 1.0 / n), next(n);
  for (int it = 0; it < 1000000; ++it) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) next[j] += pi[i] * P[i * n + j];
    double change = 0.0;
    for (int j = 0; j < n; ++j) change += std::fabs(next[j] - pi[j]);
    pi.swap(next);
    if (change < 1e-15) break;
  }
  double h = 0.0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double p = P[i * n + j];
      if (p > 0) h -= pi[i] * p * std::log(p);
    }
  if (stationary) *stationary = pi;
  return h;
}

MarkovSource::MarkovSource(const MarkovOptions& o) : symbols_(o.symbols), options_(o) {
  const int n = o.symbols;
  if (n < 2 || n > 65535) throw UsageError("synthetic: symbols must be in [2, 65535], got " + std::to_string(n));
  if (o.extra_successors < 0 || o.extra_successors >= n)
    throw UsageError("synthetic: extra successors must be in [0, symbols), got " +
                     std::to_string(o.extra_successors));
  if (o.documents < 1 || o.tokens_per_document < 1)
    throw UsageError("synthetic: documents and tokens per document must be at least 1");
  SplitMix rng(mix64(o.seed ^ 0x4d41524b4f56ULL));
  P_.assign(std::size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    std::vector<bool> support(n, false);
    support[(i + 1) % n] = true;
    if (i == 0) support[0] = true;
    for (int k = 0; k < o.extra_successors; ++k) support[rng.next() % uint64_t(n)] = true;
    double sum = 0.0;
    for (int j = 0; j < n; ++j)
      if (support[j]) sum += (P_[i * n + j] = -std::log(1.0 - rng.uniform()) + 1e-12);
    for (int j = 0; j < n; ++j) P_[i * n + j] /= sum;
  }
  entropy_ = markov_entropy_rate(P_, n, &pi_);
  cumulative_.resize(P_.size());
  for (int i = 0; i < n; ++i) {
    double c = 0.0;
    for (int j = 0; j < n; ++j) cumulative_[i * n + j] = (c += P_[i * n + j]);
  }
  pi_cumulative_.resize(n);
  double c = 0.0;
  for (int j = 0; j < n; ++j) pi_cumulative_[j] = (c += pi_[j]);
}

std::vector<uint32_t> MarkovSource::document(uint64_t k) const {
  SplitMix rng(mix64(mix64(options_.seed) + 0x9e3779b97f4a7c15ULL * (k + 1)));
  const int n = symbols_;
  std::vector<uint32_t> out(options_.tokens_per_document);
  int state = draw(pi_cumulative_.data(), n, rng.uniform());
  out[0] = uint32_t(state);
  for (std::size_t t = 1; t < out.size(); ++t) {
    state = draw(cumulative_.data() + std::size_t(state) * n, n, rng.uniform());
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
