// Synthetic corpus with a known entropy rate: a seeded random first-order Markov chain.
//
// Chain. `symbols` states (tokens 0..symbols-1). Row i of the transition matrix P has support
// {i+1 mod symbols} plus `extra_successors` further states drawn at random (state 0 also always
// keeps a self-loop), so the chain is irreducible (the i -> i+1 cycle) and aperiodic (the self-loop);
// the weights on the support are i.i.d. Exp(1) draws normalised to 1. Everything comes from a
// splitmix64 stream of the seed, so the same seed gives the same chain and corpus on any machine.
// The chain is held sparse (a row is its successors and their probabilities), so its memory is
// proportional to symbols x (extra_successors + 2), not symbols^2: GPT-2's vocabulary (50,257
// tokens, --symbols 50256) takes a few megabytes, where a dense matrix would take 20 GB.
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

inline constexpr int kMaxMarkovSymbols = 65535;   // tokens are stored as uint16 with one separator
inline constexpr int kMaxMarkovExtraSuccessors = 64;  // successors drawn per row beyond i+1

struct MarkovOptions {
  int symbols = 16;  // [2, kMaxMarkovSymbols]
  int extra_successors = 3;  // [0, min(symbols, kMaxMarkovExtraSuccessors + 1))
  uint64_t seed = 1;
  uint64_t documents = 20;
  uint64_t tokens_per_document = 10000;
  bool operator==(const MarkovOptions&) const = default;
};

// A row-stochastic matrix in compressed rows: row i's successors are
// successor[row_begin[i] .. row_begin[i+1]) in ascending order, with their probabilities at the
// same positions (each row sums to 1). States missing from a row have probability 0.
struct SparseChain {
  int states = 0;
  std::vector<std::size_t> row_begin;  // states + 1 offsets
  std::vector<uint32_t> successor;
  std::vector<double> probability;
  // P(i -> j); 0 when j is not a successor of i.
  double transition(int i, int j) const;
};

// Entropy rate (nats per token) of a chain, via power iteration for its stationary distribution.
double markov_entropy_rate(const SparseChain& chain, std::vector<double>* stationary = nullptr);
// The same for a dense row-major n x n matrix (its nonzero entries taken as the sparse chain).
double markov_entropy_rate(const std::vector<double>& P, int n, std::vector<double>* stationary = nullptr);

class MarkovSource {
 public:
  // Throws UsageError naming the range for options outside the limits above.
  explicit MarkovSource(const MarkovOptions& options);

  int symbols() const { return chain_.states; }
  const SparseChain& chain() const { return chain_; }
  double transition(int i, int j) const { return chain_.transition(i, j); }
  const std::vector<double>& stationary() const { return pi_; }
  double entropy_nats_per_token() const { return entropy_; }

  // Document k's tokens (deterministic in (seed, k)).
  std::vector<uint32_t> document(uint64_t k) const;

 private:
  MarkovOptions options_;
  SparseChain chain_;
  std::vector<double> cumulative_;  // per row, at the chain's positions: running sums of probability
  std::vector<double> pi_, pi_cumulative_;
  double entropy_ = 0.0;
};

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
