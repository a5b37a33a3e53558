#include "shardtrain/releaseeval/evaluation.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/h5file.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/ckpt/ckpt.hpp"
#include "shardtrain/data/selection.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/stats/bootstrap.hpp"
#include "shardtrain/train/evaluation.hpp"
#include "shardtrain/train/run_summary.hpp"

namespace shardtrain {
namespace fs = std::filesystem;

data::TrainingData open_selection(const HoldoutPlan& plan) {
  return data::TrainingData::open(plan.data_path, data::SelectionOptions{plan.cutoff, std::nullopt, plan.seq_len});
}

namespace {

// The hold-out of a plan and the samples to score.
class HoldoutView {
 public:
  explicit HoldoutView(const HoldoutPlan& plan) : HoldoutView(plan, open_selection(plan)) {}
  // `data`: the plan's selection (open_selection), when the caller has it open already.
  HoldoutView(const HoldoutPlan& plan, data::TrainingData data) : plan_(plan), data_(std::move(data)) {
    if (plan.max_samples < 0) throw UsageError("--max-samples must be >= 0 (0: every hold-out sample)");
    // The trainer's hold-out samples too (data/selection.hpp): one definition of the hold-out.
    for (const std::uint64_t index : data::spread_holdout_samples(data_.holdout_slices(), plan.max_samples)) {
      const std::size_t slice = data_.holdout_slice_of(index);
      samples_.push_back({slice, index - data_.holdout_slices()[slice].first_sample, index});
    }
    if (samples_.empty())
      throw UsageError(plan.data_path + ": no hold-out sample after --cutoff " + plan.cutoff + " at seq_len " +
                       std::to_string(plan.seq_len) + " (no document with event_time after the cutoff, or too short)");
  }

  struct Sample {
    std::size_t slice;
    std::uint64_t index;    // within the slice
    std::uint64_t holdout;  // within the hold-out (what data::spread_holdout_samples returns)
  };
  const std::vector<Sample>& samples() const { return samples_; }
  std::vector<std::uint64_t> holdout_indices() const {
    std::vector<std::uint64_t> v;
    for (const Sample& s : samples_) v.push_back(s.holdout);
    return v;
  }
  const data::TrainingData& data() const { return data_; }

  // Reads sample i's seq_len + 1 tokens into out.
  void read(std::size_t i, std::int32_t* out) const {
    const Sample& s = samples_[i];
    data_.read_holdout_sample(data_.holdout_slices()[s.slice].first_sample + s.index, out);
  }
  // The owner and version of target position t (0-based, target token t + 1) of sample i.
  std::pair<const std::string&, std::int64_t> slice_of_target(std::size_t i, int t) const {
    const Sample& s = samples_[i];
    const std::uint64_t token = s.index * std::uint64_t(plan_.seq_len) + std::uint64_t(t) + 1;
    const data::HoldoutSlice& slice = data_.holdout_slices()[s.slice];
    const auto& ends = slice.document_ends;
    auto it = std::upper_bound(ends.begin(), ends.end(), token);
    if (it == ends.end()) --it;  // unreachable: a sample lies inside its stream
    return {slice.owner, slice.document_versions[std::size_t(it - ends.begin())]};
  }

  HoldoutIdentity identity() const {
    HoldoutIdentity h;
    h.data = plan_.data_path;
    h.dataset_snapshot_id = data_.dataset_snapshot_id();
    h.selection_snapshot_id = data_.selection_snapshot_id();
    h.cutoff = plan_.cutoff;
    h.seq_len = plan_.seq_len;
    h.max_samples = plan_.max_samples;
    h.samples = samples_.size();
    h.documents = data_.num_holdout_documents();
    return h;
  }

 private:
  HoldoutPlan plan_;
  data::TrainingData data_;
  std::vector<Sample> samples_;
};

// Loads the checkpoint's parameters (registry order) into a model built from its config.
std::vector<float> read_parameters(const ckpt::CheckpointReader& reader, const ParameterRegistry& registry) {
  std::vector<float> flat(registry.total());
  for (const auto& t : registry.tensors()) {
    const auto& info = reader.at(t.name);
    if (info.spec.numel() != std::int64_t(t.numel) || info.spec.dtype != DType::kFloat32)
      throw UsageError(reader.folder() + ": tensor " + t.name + " has another shape or type than the model's");
    reader.read(t.name, flat.data() + t.offset);
  }
  return flat;
}

CheckpointIdentity checkpoint_identity(const ckpt::CheckpointReader& reader) {
  const auto& m = reader.manifest();
  CheckpointIdentity c;
  c.folder = fs::absolute(reader.folder()).lexically_normal().string();
  c.step = m.step;
  c.manifest_sha256 = reader.manifest_sha256();
  for (const auto& f : m.files) c.files.push_back({f.name, f.sha256, f.bytes});
  c.model = m.model;
  c.config = m.config;
  c.data_snapshot_id = m.data_snapshot_id;
  c.data_cutoff = m.data_cutoff;
  c.code_version = m.code_version;
  return c;
}

// The training run's figures from its summary.json (read by read_run_summary, the file's one
// reader), or nothing when the default path has none.
std::optional<TrainingFigures> training_figures(const std::string& checkpoint_folder, const std::string& given) {
  std::string path = given;
  if (path.empty()) {
    path = (fs::path(checkpoint_folder).parent_path().parent_path() / "summary.json").string();
    if (!fs::exists(path)) return std::nullopt;
  }
  const RunSummary s = read_run_summary(path, "the training run's summary (--summary)");
  TrainingFigures t;
  t.summary = path;
  t.throughput_tokens_per_s = s.throughput_tokens_per_s;
  if (s.scaling) t.scaling_efficiency = s.scaling->scaling_efficiency;
  t.mfu = s.mfu;
  t.world_size = s.world_size;
  return t;
}

}  // namespace

std::string resolve_checkpoint_folder(const std::string& path) {
  if (fs::exists(fs::path(path) / ckpt::kIndexFile)) return path;
  for (const fs::path& dir : {fs::path(path), fs::path(path) / "checkpoints"}) {
    if (!fs::exists(dir / ckpt::kLatestFile)) continue;
    const std::string latest = ckpt::read_latest(dir.string());
    if (!latest.empty()) return (dir / latest).string();
  }
  throw UsageError(path + ": not a checkpoint (no index.h5) nor a checkpoint or run folder with a `latest`; name a "
                   "step_<N> folder");
}

CheckpointEvaluation evaluate_checkpoint(const std::string& checkpoint, const ReleaseEvalOptions& o) {
  const Stopwatch wall;
  if (o.batch < 1 || o.latency_batch < 1 || o.latency_runs < 2 || o.threads < 1)
    throw UsageError("--batch, --latency-batch and --threads must be >= 1, --latency-runs >= 2");
  const ckpt::CheckpointReader reader(resolve_checkpoint_folder(checkpoint));
  const ModelConfig config = ModelConfig::from_json(reader.manifest().model);
  HoldoutPlan plan = o.holdout;
  plan.seq_len = config.seq_len;
  const HoldoutView view(plan);
  if (view.data().vocab() > config.vocab)
    throw UsageError(plan.data_path + " has vocabulary " + std::to_string(view.data().vocab()) +
                     " but the checkpoint's model has " + std::to_string(config.vocab));
  auto backend = make_cpu_backend(o.threads);
  GptModel model(*backend, config, std::max(o.batch, o.latency_batch));
  model.set_parameters(read_parameters(reader, model.registry()));
  log_line("release-gate: scoring " + std::to_string(view.samples().size()) + " hold-out sequences of " +
           std::to_string(config.seq_len) + " tokens from " + reader.folder());

  const int T = config.seq_len, V = config.vocab;
  HoldoutScores scores(plan.calibration_bins);
  // The trainer's scoring loop (train/evaluation.hpp): the same samples, forwards and token loss.
  const double forward_s = score_holdout_positions(
      model, view.data(), view.holdout_indices(), o.batch, [&](std::size_t i, int t, const float* logits, int target) {
        const auto [owner, version] = view.slice_of_target(i, t);
        scores.add(score_logits(logits, V, target), i, owner, version);
      });
  // Latency probe: the same forward (logits downloaded) at latency_batch, after a warm-up.
  std::vector<double> ms_per_sequence;
  std::vector<std::int32_t> probe(std::size_t(o.latency_batch) * (T + 1));
  for (int j = 0; j < o.latency_batch; ++j)
    view.read(std::size_t(j) % view.samples().size(), probe.data() + std::size_t(j) * (T + 1));
  for (int run = -1; run < o.latency_runs; ++run) {
    const Stopwatch watch;
    model.forward(probe.data(), o.latency_batch);
    (void)model.download_logits();
    if (run >= 0) ms_per_sequence.push_back(watch.seconds() * 1000 / o.latency_batch);
  }
  std::sort(ms_per_sequence.begin(), ms_per_sequence.end());
  const double positions = double(scores.positions());
  CheckpointEvaluation result;
  result.kind = kCheckpointEvaluation;
  result.checkpoint = checkpoint_identity(reader);
  result.holdout = view.identity();
  result.scores = scores.summary(plan.bootstrap);
  result.latency = {o.latency_batch,
                    o.latency_runs,
                    o.threads,
                    interpolated_percentile(ms_per_sequence, 0.50),
                    interpolated_percentile(ms_per_sequence, 0.99),
                    positions / forward_s};
  result.training = training_figures(reader.folder(), o.summary_path);
  result.seconds = wall.seconds();
  result.evaluated_tokens_per_s = positions / result.seconds;
  return result;
}

void check_ngram_order(int order) {
  if (order != 1 && order != 2) throw UsageError("--order must be 1 (unigram) or 2 (bigram)");
}

NgramModel fit_ngram(const HoldoutPlan& plan, int order) {
  check_ngram_order(order);
  return fit_ngram(plan, open_selection(plan), order);
}

NgramModel fit_ngram(const HoldoutPlan& plan, const data::TrainingData& data, int order) {
  check_ngram_order(order);
  NgramModel m;
  m.order = order;
  m.vocab = data.vocab();
  const std::size_t V = std::size_t(m.vocab);
  std::vector<double> unigram(V, 1.0), pairs(order == 2 ? V * V : 0), row_total(order == 2 ? V : 0);
  std::vector<std::int32_t> tokens(std::size_t(plan.seq_len) + 1);
  if (data.num_train_samples() == 0) throw UsageError(plan.data_path + ": no training sample up to --cutoff " + plan.cutoff);
  for (std::uint64_t i = 0; i < data.num_train_samples(); ++i) {
    data.read_train_sample(i, tokens.data());
    for (int t = 1; t <= plan.seq_len; ++t) {  // the targets of the sample, each counted once over the stream
      unigram[std::size_t(tokens[std::size_t(t)])] += 1;
      if (order == 2) {
        pairs[std::size_t(tokens[std::size_t(t) - 1]) * V + std::size_t(tokens[std::size_t(t)])] += 1;
        row_total[std::size_t(tokens[std::size_t(t) - 1])] += 1;
      }
      ++m.counted_tokens;
    }
  }
  const double total = double(m.counted_tokens) + double(V);
  for (auto& u : unigram) u /= total;
  if (order == 1) {
    m.probabilities = unigram;
    return m;
  }
  constexpr double kAlpha = 10;
  m.probabilities.resize(V * V);
  for (std::size_t a = 0; a < V; ++a)
    for (std::size_t b = 0; b < V; ++b)
      m.probabilities[a * V + b] = (pairs[a * V + b] + kAlpha * unigram[b]) / (row_total[a] + kAlpha);
  return m;
}

CheckpointEvaluation evaluate_ngram(const NgramModel& model, const HoldoutPlan& plan) {
  return evaluate_ngram(model, plan, open_selection(plan));
}

CheckpointEvaluation evaluate_ngram(const NgramModel& model, const HoldoutPlan& plan, data::TrainingData selection) {
  const HoldoutView view(plan, std::move(selection));
  if (view.data().vocab() != model.vocab) throw UsageError("the n-gram's vocabulary differs from " + plan.data_path + "'s");
  const int T = plan.seq_len;
  HoldoutScores scores(plan.calibration_bins);
  std::vector<std::int32_t> tokens(std::size_t(T) + 1);
  for (std::size_t i = 0; i < view.samples().size(); ++i) {
    view.read(i, tokens.data());
    for (int t = 0; t < T; ++t) {
      const auto [owner, version] = view.slice_of_target(i, t);
      scores.add(score_probabilities(model.next(tokens[std::size_t(t)]), model.vocab, tokens[std::size_t(t) + 1]), i,
                 owner, version);
    }
  }
  CheckpointEvaluation e;
  e.kind = kNgramEvaluation;
  e.order = model.order;
  e.counted_tokens = model.counted_tokens;
  e.holdout = view.identity();
  e.scores = scores.summary(plan.bootstrap);
  return e;
}

void write_ngram_file(const NgramModel& model, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    H5File f(tmp, H5File::Mode::kCreate);
    const std::vector<float> p(model.probabilities.begin(), model.probabilities.end());
    std::vector<std::int64_t> dims{model.vocab};
    if (model.order == 2) dims.push_back(model.vocab);
    f.write_floats("ngram/probabilities", p, dims);
    f.write_attr("order", std::int64_t(model.order));
    f.write_attr("counted_tokens", std::int64_t(model.counted_tokens));
  }
  commit_file_atomically(tmp, path);
}

NgramModel read_ngram_file(const std::string& path) {
  if (!std::filesystem::exists(path)) throw IoError(path + ": no n-gram model file (registered with release-gate baseline?)");
  const H5File f(path, H5File::Mode::kRead);
  std::vector<std::int64_t> dims;
  const std::vector<float> p = f.read_floats("ngram/probabilities", &dims);
  NgramModel m;
  m.order = int(f.read_attr_int("order"));
  m.counted_tokens = std::uint64_t(f.read_attr_int("counted_tokens"));
  const bool ok = !dims.empty() && dims[0] > 0 && std::size_t(m.order) == dims.size() && (m.order == 1 || dims[1] == dims[0]);
  if (!ok) throw UsageError(path + ": /ngram/probabilities is not an order-" + std::to_string(m.order) + " model's (V) or (V, V)");
  m.vocab = int(dims[0]);
  m.probabilities.assign(p.begin(), p.end());
  return m;
}

}  // namespace shardtrain
