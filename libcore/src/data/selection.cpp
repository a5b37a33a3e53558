// Cutoff selection, selection snapshot id and the in-memory training view (rules in selection.hpp).
#include "shardtrain/data/selection.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"

namespace shardtrain::data {

namespace {
// Keeps, per id, the index of the newest version (ties: the later row) among offered candidates.
class NewestPerId {
 public:
  explicit NewestPerId(const std::vector<DocumentRecord>& docs) : docs_(docs) {}
  void offer(std::size_t i) {
    auto [it, inserted] = best_.emplace(docs_[i].id, i);
    if (!inserted && docs_[i].version >= docs_[it->second].version) it->second = i;
  }
  std::vector<std::size_t> sorted_indices() const {
    std::vector<std::size_t> out;
    out.reserve(best_.size());
    for (const auto& kv : best_) out.push_back(kv.second);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  const std::vector<DocumentRecord>& docs_;
  std::unordered_map<std::string_view, std::size_t> best_;
};
}  // namespace

Selection select_documents(const std::vector<DocumentRecord>& docs, std::optional<int64_t> cutoff,
                           std::optional<int64_t> eval_from) {
  std::optional<int64_t> E = eval_from ? eval_from : cutoff;
  NewestPerId train(docs), holdout(docs);
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const auto& d = docs[i];
    bool in_eval_period = E && d.event_time > *E;
    if (in_eval_period) holdout.offer(i);
    else if (!cutoff || d.available_time <= *cutoff) train.offer(i);
  }
  Selection s;
  s.train = train.sorted_indices();
  s.holdout = holdout.sorted_indices();
  Sha256 h;
  h.update("shardtrain-selection-v1\n");
  h.update("train\n");
  for (auto i : s.train) hash_document_key(h, docs[i].id, docs[i].version, docs[i].token_sha256);
  h.update("holdout\n");
  for (auto i : s.holdout) hash_document_key(h, docs[i].id, docs[i].version, docs[i].token_sha256);
  s.snapshot_id = to_hex(h.digest());
  return s;
}

uint64_t samples_in_stream(uint64_t tokens, int seq_len) {
  if (seq_len < 1 || tokens < uint64_t(seq_len) + 1) return 0;
  return (tokens - 1) / uint64_t(seq_len);
}

namespace {
void put_token(std::vector<uint8_t>& stream, uint64_t pos, int width, uint32_t value) {
  for (int b = 0; b < width; ++b) stream[pos * width + b] = uint8_t(value >> (8 * b));
}

// Destination of one selected document inside an in-memory stream.
struct Placement {
  std::size_t doc;
  std::vector<uint8_t>* stream;
  uint64_t dest_token;  // first token position in the stream
};

// Reads the placed documents from the file in offset order through a block buffer, so many small
// documents cost a few large HDF5 reads instead of one read each.
void fill_streams(const DatasetReader& reader, std::vector<Placement> placements, int width) {
  const auto& docs = reader.documents();
  std::sort(placements.begin(), placements.end(),
            [&](const Placement& a, const Placement& b) { return docs[a.doc].offset < docs[b.doc].offset; });
  const uint64_t kBlock = uint64_t(4) << 20;  // tokens
  const uint64_t total = reader.header().num_tokens;
  std::vector<uint8_t> block;
  uint64_t block_start = 0, block_len = 0;
  for (const auto& p : placements) {
    const auto& d = docs[p.doc];
    uint8_t* dst = p.stream->data() + p.dest_token * width;
    if (d.length == 0) continue;
    if (d.length >= kBlock) {  // large document: straight into place
      reader.read_tokens_stored(d.offset, d.length, dst);
      continue;
    }
    if (d.offset < block_start || d.offset + d.length > block_start + block_len) {
      block_start = d.offset;
      block_len = std::min(kBlock, total - d.offset);
      block.resize(block_len * width);
      reader.read_tokens_stored(block_start, block_len, block.data());
    }
    std::memcpy(dst, block.data() + (d.offset - block_start) * width, d.length * width);
  }
}
}  // namespace

TrainingData TrainingData::open(const std::string& path, const SelectionOptions& options) {
  if (options.seq_len < 1)
    throw UsageError("seq_len must be at least 1 (got " + std::to_string(options.seq_len) + ")");
  TrainingData t;
  t.seq_len_ = options.seq_len;
  if (options.cutoff) t.cutoff_ = parse_rfc3339(*options.cutoff, "--cutoff");
  if (options.eval_from) t.eval_from_ = parse_rfc3339(*options.eval_from, "--eval-from");
  else t.eval_from_ = t.cutoff_;
  DatasetReader reader = DatasetReader::open(path);
  const auto& header = reader.header();
  const auto& docs = reader.documents();
  t.path_ = path;
  t.tokenizer_ = header.tokenizer;
  t.vocab_ = header.vocab;
  t.separator_ = header.separator_token;
  t.width_ = header.token_bits / 8;
  t.dataset_snapshot_id_ = header.snapshot_id;
  t.selection_ = select_documents(docs, t.cutoff_, t.eval_from_);

  std::vector<Placement> placements;
  // Train stream.
  uint64_t n = 0;
  for (std::size_t k = 0; k < t.selection_.train.size(); ++k) n += docs[t.selection_.train[k]].length + (k > 0);
  t.train_.assign(n * t.width_, 0);
  uint64_t pos = 0;
  for (std::size_t k = 0; k < t.selection_.train.size(); ++k) {
    if (k > 0) put_token(t.train_, pos++, t.width_, uint32_t(t.separator_));
    placements.push_back({t.selection_.train[k], &t.train_, pos});
    pos += docs[t.selection_.train[k]].length;
  }
  // Hold-out slices, by owner name.
  std::map<std::string, std::vector<std::size_t>> by_owner;
  for (auto i : t.selection_.holdout) by_owner[reader.owners()[docs[i].owner]].push_back(i);
  t.holdout_.resize(by_owner.size());
  uint64_t first_sample = 0;
  std::size_t s = 0;
  for (const auto& [owner, list] : by_owner) {
    HoldoutSlice slice;
    slice.owner = owner;
    slice.documents = list.size();
    for (std::size_t k = 0; k < list.size(); ++k) slice.tokens += docs[list[k]].length + (k > 0);
    auto& stream = t.holdout_[s];
    stream.assign(slice.tokens * t.width_, 0);
    uint64_t p = 0;
    for (std::size_t k = 0; k < list.size(); ++k) {
      if (k > 0) put_token(stream, p++, t.width_, uint32_t(t.separator_));
      placements.push_back({list[k], &stream, p});
      p += docs[list[k]].length;
      slice.document_ends.push_back(p + 1);
      slice.document_versions.push_back(docs[list[k]].version);
    }
    slice.samples = samples_in_stream(slice.tokens, t.seq_len_);
    slice.first_sample = first_sample;
    first_sample += slice.samples;
    t.slices_.push_back(slice);
    ++s;
  }
  fill_streams(reader, std::move(placements), t.width_);
  return t;
}

void TrainingData::copy_tokens(const std::vector<uint8_t>& stream, uint64_t first, int32_t* out) const {
  const std::size_t n = std::size_t(seq_len_) + 1;
  const uint8_t* src = stream.data() + first * width_;
  if (width_ == 1) {
    for (std::size_t i = 0; i < n; ++i) out[i] = src[i];
  } else if (width_ == 2) {
    for (std::size_t i = 0; i < n; ++i) out[i] = int32_t(src[2 * i] | (uint32_t(src[2 * i + 1]) << 8));
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      uint32_t v;
      std::memcpy(&v, src + 4 * i, 4);
      out[i] = int32_t(v);
    }
  }
}

void TrainingData::read_train_sample(uint64_t sample_index, int32_t* out) const {
  if (sample_index >= num_train_samples())
    throw UsageError("train sample " + std::to_string(sample_index) + " is out of range (" +
                     std::to_string(num_train_samples()) + " samples)");
  copy_tokens(train_, sample_index * uint64_t(seq_len_), out);
}

std::vector<uint64_t> spread_holdout_samples(const std::vector<HoldoutSlice>& slices, int max_samples) {
  if (max_samples < 0) throw UsageError("the hold-out sample count must be >= 0 (0: every hold-out sample)");
  std::vector<uint64_t> samples;
  if (slices.empty()) return samples;
  const uint64_t per_slice = max_samples == 0 ? UINT64_MAX : std::max<uint64_t>(1, uint64_t(max_samples) / slices.size());
  for (const HoldoutSlice& slice : slices) {
    const uint64_t n = std::min(per_slice, slice.samples);
    for (uint64_t k = 0; k < n; ++k) samples.push_back(slice.first_sample + k * slice.samples / n);
  }
  return samples;
}

uint64_t TrainingData::num_holdout_samples() const {
  return slices_.empty() ? 0 : slices_.back().first_sample + slices_.back().samples;
}

std::size_t TrainingData::holdout_slice_of(uint64_t sample_index) const {
  if (sample_index >= num_holdout_samples())
    throw UsageError("hold-out sample " + std::to_string(sample_index) + " is out of range (" +
                     std::to_string(num_holdout_samples()) + " samples)");
  auto it = std::upper_bound(slices_.begin(), slices_.end(), sample_index,
                             [](uint64_t v, const HoldoutSlice& s) { return v < s.first_sample; });
  // The slice before `it` holds the sample: the next one starts after it (an empty slice cannot).
  return std::size_t(it - slices_.begin()) - 1;
}

void TrainingData::read_holdout_sample(uint64_t sample_index, int32_t* out) const {
  std::size_t k = holdout_slice_of(sample_index);
  copy_tokens(holdout_[k], (sample_index - slices_[k].first_sample) * uint64_t(seq_len_), out);
}

DataSelectionInfo TrainingData::describe() const {
  DataSelectionInfo d;
  d.path = path_;
  d.dataset_snapshot_id = dataset_snapshot_id_;
  d.selection_snapshot_id = selection_.snapshot_id;
  if (cutoff_) d.cutoff = format_rfc3339(*cutoff_);
  if (eval_from_) d.eval_from = format_rfc3339(*eval_from_);
  d.vocab = vocab_;
  d.tokenizer = tokenizer_;
  d.separator_token = separator_;
  d.seq_len = seq_len_;
  d.train = {num_train_documents(), num_train_tokens(), num_train_samples()};
  d.holdout_documents = num_holdout_documents();
  d.holdout_samples = num_holdout_samples();
  for (const auto& s : slices_) d.holdout_slices.push_back({s.owner, s.documents, s.tokens, s.samples});
  return d;
}

}  // namespace shardtrain::data
