#include "shardtrain/train/evaluation.hpp"

#include <algorithm>
#include <filesystem>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/h5file.hpp"

namespace shardtrain {

nlohmann::json evaluate_holdout(GptModel& model, const data::TrainingData& data, int max_samples) {
  const auto& slices = data.holdout_slices();
  if (slices.empty() || data.num_holdout_samples() == 0) return nullptr;
  const std::size_t T = model.config().seq_len;
  const std::uint64_t per_slice = std::max<std::uint64_t>(1, std::uint64_t(max_samples) / slices.size());
  std::vector<std::int32_t> tokens(std::size_t(model.max_batch()) * (T + 1));
  double total_loss = 0, total_tokens = 0;
  nlohmann::json by_owner = nlohmann::json::object();
  for (const auto& slice : slices) {
    const std::uint64_t n = std::min(per_slice, slice.samples);
    if (n == 0) continue;
    double loss = 0;
    for (std::uint64_t first = 0; first < n; first += model.max_batch()) {
      const int b = int(std::min<std::uint64_t>(model.max_batch(), n - first));
      for (int j = 0; j < b; ++j) data.read_holdout_sample(slice.first_sample + first + j, tokens.data() + j * (T + 1));
      loss += model.eval_micro_batch(tokens.data(), b);
    }
    const double count = double(n) * T;
    by_owner[slice.owner] = loss / count;
    total_loss += loss;
    total_tokens += count;
  }
  if (total_tokens == 0) return nullptr;
  return {{"holdout_loss", total_loss / total_tokens}, {"holdout_tokens", total_tokens}, {"holdout_loss_by_owner", by_owner}};
}

void write_parameters_file(const GptModel& model, const std::string& path) {
  const std::vector<float> flat = model.download_parameters();
  const std::string tmp = path + ".tmp";
  {
    H5File f(tmp, H5File::Mode::kCreate);
    for (const auto& t : model.registry().tensors())
      f.write_floats("params/" + t.name, std::vector<float>(flat.begin() + t.offset, flat.begin() + t.offset + t.numel),
                     t.shape);
  }
  commit_file_atomically(tmp, path);
}

}  // namespace shardtrain
