// Synthetic corpus with a known entropy rate: a seeded random first-order Markov chain.
//
// Chain. `symbols` states (tokens 0..symbols-1). Row i of the transition matrix P has support
// {i+1 mod symbols} plus `extra_successors` further states drawn at random (state 0 also always
// keeps a self-loop), so the chain is irreducible (the i -> i+1 cycle) and aperiodic (the self-loop);
// the weights on the support are i.i.d. Exp(1) draws normalised to 1. Everything comes from a
// splitmix64 stream of the seed, so the same seed gives the same chain and corpus on any machine.
//
// Entropy rate (nats per token): H = -sum_i pi_i sum_j P_ij ln P_ij, with the stationary
// distribution pi from power iteration (pi <- pi P until the L1 change is below 1e-15).
// That is the loss (cross-entropy in nats) of the best possible predictor of the next token given
// the past, so a model's hold-out loss approaches H from above.
//
// Corpus. `documents` documents of `tokens_per_document` tokens; document k starts in a state drawn
// from pi and continues the chain. The dataset vocab is symbols + 1 and the separator token is
// `symbols` (never emitted by the chain). Document k has id "markov-%05d", version 1, owner
// "markov-a" (even k) or "markov-b" (odd k), event_time = kSyntheticEpoch + k * 86400 (one document
// per day from 2024-01-01T00:00:00Z), available_time = event_time + 3600. The separators and the
// first token of each document cost slightly more than H; with 10^4-token documents that adds
// about 2e-4 nats per token on average, well below a 5% tolerance.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardtrain::data {

inline constexpr int64_t kSyntheticEpoch = 1704067200;  // 2024-01-01T00:00:00Z

struct MarkovOptions {
  int symbols = 16;
  int extra_successors = 3;
  uint64_t seed = 1;
  uint64_t documents = 20;
  uint64_t tokens_per_document = 10000;
  bool operator==(const MarkovOptions&) const = default;
};

class MarkovSource {
 public:
  explicit MarkovSource(const MarkovOptions& options);

  int symbols() const { return symbols_; }
  // Row-major symbols x symbols transition matrix, rows sum to 1.
  const std::vector<double>& transition() const { return P_; }
  const std::vector<double>& stationary() const { return pi_; }
  double entropy_nats_per_token() const { return entropy_; }

  // Document k's tokens (deterministic in (seed, k)).
  std::vector<uint32_t> document(uint64_t k) const;

 private:
  int symbols_;
  MarkovOptions options_;
  std::vector<double> P_, cumulative_, pi_, pi_cumulative_;
  double entropy_ = 0.0;
};

// Entropy rate of any row-stochastic matrix (row-major n x n), via power iteration for pi.
double markov_entropy_rate(const std::vector<double>& P, int n, std::vector<double>* stationary = nullptr);

// What a write of the corpus produced (data-prep --synthetic prints it as JSON).
struct MarkovCorpus {
  std::string output;             // the file written
  MarkovOptions spec;             // the options it was generated with
  std::uint64_t documents = 0, tokens = 0;
  std::int64_t vocab = 0, separator_token = 0;  // symbols + 1 and symbols
  double entropy_nats_per_token = 0;            // the source's entropy rate: the loss floor
  std::optional<std::string> snapshot_id;       // a dataset's (dataset.hpp); none for JSONL
  bool operator==(const MarkovCorpus&) const = default;
  // {"output", "synthetic": {"generator": "markov", "symbols", "extra_successors", "seed",
  //  "documents", "tokens_per_document"}, "documents", "tokens", "vocab", "separator_token",
  //  "entropy_nats_per_token", "snapshot_id" (datasets only)}
  nlohmann::json to_json() const;
};

// Writes the corpus as a dataset file (with root attribute entropy_nats_per_token and
// synthetic_spec, a JSON string of the options) or as data-prep JSONL input (tokens field).
MarkovCorpus write_markov_dataset(const std::string& path, const MarkovOptions& options);
MarkovCorpus write_markov_jsonl(const std::string& path, const MarkovOptions& options);

}  // namespace shardtrain::data
