// Cutoff selection and the training view of a dataset file.
//
// Rules (also in docs/FORMATS.md, "Selection"):
//  * cutoff C (optional; absent = every document is available). A version is eligible for training
//    when available_time <= C and event_time <= E (below; E absent = no condition). The train set
//    takes the NEWEST eligible version (largest version number) of every id that has one.
//  * eval_from E (optional; defaults to C; absent with C absent = no hold-out). The temporal
//    hold-out takes, for every id, the newest version among those with event_time > E, regardless of
//    availability. Since available_time >= event_time, with E = C no train document is in the
//    hold-out period. One id may have an older version in train and a newer one in the hold-out.
//  * Order: selected documents keep file order. The train stream is the concatenation of the train
//    documents with the separator token between consecutive documents (none before the first or
//    after the last). The hold-out is cut into per-owner slices: owner k's stream is the
//    concatenation (with separators) of its hold-out documents; slices are ordered by owner name.
//  * Samples: sample i of a stream of T tokens is tokens [i*seq_len, i*seq_len + seq_len + 1)
//    (inputs = first seq_len tokens, targets = last seq_len: consecutive samples share one token);
//    a stream has floor((T - 1) / seq_len) samples (0 when T < seq_len + 1).
//  * selection_snapshot_id: hex SHA-256 over "shardtrain-selection-v1\n", then "train\n" and every
//    train document (id, '\0', version, '\0', token_sha256) in file order, then "holdout\n" and the
//    hold-out documents the same way. It changes exactly when the selected documents (or their
//    content) change; the cutoff and eval_from strings themselves are reported beside it, not hashed,
//    so two cutoffs that select the same documents train on, and are identified as, the same data.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"

#include "shardtrain/data/dataset.hpp"

namespace shardtrain::data {

// Options a trainer passes (from --cutoff, --eval-from, --seq-len).
struct SelectionOptions {
  std::optional<std::string> cutoff;     // RFC 3339; absent = no cutoff
  std::optional<std::string> eval_from;  // RFC 3339; absent = the cutoff (if any)
  int seq_len = 0;                       // tokens per sample input; > 0
};

// Which documents (indices into the document table, ascending = file order) are used.
struct Selection {
  std::vector<std::size_t> train;
  std::vector<std::size_t> holdout;
  std::string snapshot_id;
};

// Pure selection over a document table (rules above). cutoff / eval_from in unix seconds.
Selection select_documents(const std::vector<DocumentRecord>& documents,
                           std::optional<int64_t> cutoff, std::optional<int64_t> eval_from);

// Number of samples of seq_len+1 tokens (stride seq_len) in a stream of `tokens` tokens.
uint64_t samples_in_stream(uint64_t tokens, int seq_len);

// One owner's part of the hold-out.
struct HoldoutSlice {
  std::string owner;
  uint64_t documents = 0;
  uint64_t tokens = 0;        // including separators between its documents
  uint64_t first_sample = 0;  // its samples are [first_sample, first_sample + samples) of the hold-out
  uint64_t samples = 0;
  // Per document, in stream order: where it ends in the slice's stream, its separator included
  // (its first token's position + length + 1), and its version. Token position p belongs to the
  // first document whose end is above p (hold-out slice attribution of release evaluations).
  std::vector<uint64_t> document_ends;
  std::vector<int64_t> document_versions;
};

// The hold-out samples an evaluation scores: the one definition behind the trainer's hold-out loss
// (summary.json, the progress lines) and release-gate's (evaluation.json), so one checkpoint,
// data, cutoff and sample count give one loss. max_samples = 0: every sample; else up to
// max(1, max_samples / slices) per owner slice, evenly spaced within it (sample floor(k n_s / n),
// k < n, of a slice of n_s samples), slices in owner order. Indices are into the hold-out, i.e.
// slice.first_sample + the index within the slice. Throws UsageError for max_samples < 0.
std::vector<uint64_t> spread_holdout_samples(const std::vector<HoldoutSlice>& slices, int max_samples);

// What a run trained on, for its summary ("data", docs/FORMATS.md) and logs: the file, its
// snapshot ids, the selection's times (RFC 3339; null in JSON when unset), and the counts of the
// train stream and of each hold-out slice. Counts in documents, tokens (separators included) and
// samples of seq_len tokens.
struct DataSelectionInfo {
  struct Counts {
    std::uint64_t documents = 0, tokens = 0, samples = 0;
    static auto fields() {
      using namespace json_fields;
      return std::tuple{key("documents", &Counts::documents), key("tokens", &Counts::tokens), key("samples", &Counts::samples)};
    }
    bool operator==(const Counts&) const = default;
  };
  struct Slice {
    std::string owner;
    std::uint64_t documents = 0, tokens = 0, samples = 0;
    static auto fields() {
      using namespace json_fields;
      return std::tuple{key("owner", &Slice::owner), key("documents", &Slice::documents), key("tokens", &Slice::tokens),
                        key("samples", &Slice::samples)};
    }
    bool operator==(const Slice&) const = default;
  };
  std::string path, dataset_snapshot_id, selection_snapshot_id;
  std::optional<std::string> cutoff, eval_from;
  std::int64_t vocab = 0;
  std::string tokenizer;
  std::int64_t separator_token = 0;
  int seq_len = 0;
  Counts train;
  std::uint64_t holdout_documents = 0, holdout_samples = 0;
  std::vector<Slice> holdout_slices;

  // Every field required (cutoff and eval_from may be null); errors name the field by pointer.
  static auto fields() {
    using namespace json_fields;
    using D = DataSelectionInfo;
    return std::tuple{key("path", &D::path), key("dataset_snapshot_id", &D::dataset_snapshot_id),
                      key("selection_snapshot_id", &D::selection_snapshot_id), key("cutoff", &D::cutoff),
                      key("eval_from", &D::eval_from), key("vocab", &D::vocab), key("tokenizer", &D::tokenizer),
                      key("separator_token", &D::separator_token), key("seq_len", &D::seq_len), key("train", &D::train),
                      group("holdout", key("documents", &D::holdout_documents), key("samples", &D::holdout_samples),
                            key("slices", &D::holdout_slices))};
  }
  bool operator==(const DataSelectionInfo&) const = default;
};

// A read-only, selected view of a dataset file for training and hold-out evaluation.
// open() reads the selected documents' tokens into memory (train stream and hold-out slices, at the
// file's token width: memory = selected tokens x token_bits/8); after open no HDF5 call is made, so
// every const method is thread-safe (the batch loader's prefetch thread reads while the trainer
// writes checkpoints, whatever the HDF5 build's thread safety).
class TrainingData {
 public:
  // Throws IoError (file), UsageError (not a dataset, bad time string, seq_len < 1).
  static TrainingData open(const std::string& path, const SelectionOptions& options);

  int seq_len() const { return seq_len_; }
  int vocab() const { return int(vocab_); }
  int separator_token() const { return int(separator_); }
  const std::string& tokenizer() const { return tokenizer_; }
  const std::string& path() const { return path_; }

  // Train samples: [0, num_train_samples()).
  uint64_t num_train_samples() const { return samples_in_stream(train_.size() / width_, seq_len_); }
  uint64_t num_train_tokens() const { return train_.size() / width_; }   // stream incl. separators
  uint64_t num_train_documents() const { return selection_.train.size(); }
  // Writes seq_len+1 tokens of train sample `sample_index` to out. Throws UsageError if out of range.
  void read_train_sample(uint64_t sample_index, int32_t* out) const;

  // Hold-out: samples [0, num_holdout_samples()) are the slices' samples back to back.
  uint64_t num_holdout_samples() const;
  uint64_t num_holdout_documents() const { return selection_.holdout.size(); }
  const std::vector<HoldoutSlice>& holdout_slices() const { return slices_; }
  void read_holdout_sample(uint64_t sample_index, int32_t* out) const;
  // The slice (index into holdout_slices()) that hold-out sample `sample_index` belongs to.
  std::size_t holdout_slice_of(uint64_t sample_index) const;

  std::string selection_snapshot_id() const { return selection_.snapshot_id; }
  std::string dataset_snapshot_id() const { return dataset_snapshot_id_; }
  std::optional<int64_t> cutoff() const { return cutoff_; }          // unix seconds
  std::optional<int64_t> eval_from() const { return eval_from_; }    // unix seconds (defaulted)
  const Selection& selection() const { return selection_; }

  // For logs and summaries: path, snapshot ids, cutoff/eval_from (RFC 3339), counts, slices.
  DataSelectionInfo describe() const;

 private:
  TrainingData() = default;
  void copy_tokens(const std::vector<uint8_t>& stream, uint64_t first_token, int32_t* out) const;

  std::string path_, tokenizer_, dataset_snapshot_id_;
  int seq_len_ = 0;
  int64_t vocab_ = 0, separator_ = 0;
  int width_ = 1;  // bytes per stored token
  std::optional<int64_t> cutoff_, eval_from_;
  Selection selection_;
  std::vector<uint8_t> train_;                 // train stream, width_ bytes per token
  std::vector<std::vector<uint8_t>> holdout_;  // per slice stream
  std::vector<HoldoutSlice> slices_;
};

}  // namespace shardtrain::data
