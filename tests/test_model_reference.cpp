// The decoder against PyTorch: testdata/reference/*.h5 are written by testdata/generators/make_reference.py
// (float64 PyTorch forward/backward and a hand-written float64 AdamW from identical float32
// weights). Tolerances (relative error in max norm, max|ours - ref| / max|ref| per tensor):
//   logits, loss and the 10 step losses 1e-5; each gradient tensor 1e-4; final parameters 1e-4.
// Justification, measured by the generator: two independent float32 implementations land at
// <= 3.3e-7 (logits), <= 9e-8 (loss), <= 5.5e-7 (gradients), <= 1.2e-7 (losses), <= 1.6e-5
// (final parameters, with eps = 1e-6; see the generator's comment) from the float64 reference,
// so the bounds leave 20x or more for legitimate rounding while catching any real bug (a wrong
// sign, scale or index moves these errors to 1e-2 and above).
#include <catch2/catch.hpp>

#include <functional>
#include <memory>

#include <cmath>
#include <string>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/base/h5file.hpp"
#include "shardtrain/model/optim.hpp"
#include "shardtrain/parallel/train_step.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using shardtrain::test::max_norm_relative_error;

namespace {

struct Reference {
  ModelConfig config;
  int batch = 0;
  int steps = 0;
  OptimizerConfig optimizer;
};

Reference read_reference(const H5File& f) {
  Reference r;
  r.config.vocab = int(f.read_attr_int("vocab"));
  r.config.seq_len = int(f.read_attr_int("seq_len"));
  r.config.d_model = int(f.read_attr_int("d_model"));
  r.config.n_layer = int(f.read_attr_int("n_layer"));
  r.config.n_head = int(f.read_attr_int("n_head"));
  r.batch = int(f.read_attr_int("batch"));
  r.steps = int(f.read_attr_int("steps"));
  r.optimizer.max_lr = f.read_attr_double("max_lr");
  r.optimizer.min_lr = f.read_attr_double("min_lr");
  r.optimizer.warmup_steps = int(f.read_attr_int("warmup_steps"));
  r.optimizer.decay_steps = int(f.read_attr_int("decay_steps"));
  r.optimizer.beta1 = f.read_attr_double("beta1");
  r.optimizer.beta2 = f.read_attr_double("beta2");
  r.optimizer.eps = f.read_attr_double("eps");
  r.optimizer.weight_decay = f.read_attr_double("weight_decay");
  r.optimizer.grad_clip = f.read_attr_double("grad_clip");
  return r;
}

// Reads every parameter of the registry from `group`/<name> into one flat vector.
std::vector<float> read_flat(const H5File& f, const ParameterRegistry& reg, const std::string& group) {
  std::vector<float> flat(reg.total());
  for (const auto& t : reg.tensors()) {
    std::vector<std::int64_t> dims;
    auto values = f.read_floats(group + "/" + t.name, &dims);
    REQUIRE(dims == t.shape);
    std::copy(values.begin(), values.end(), flat.begin() + t.offset);
  }
  return flat;
}

std::vector<float> slice(const std::vector<float>& flat, const ParameterInfo& t) {
  return {flat.begin() + t.offset, flat.begin() + t.offset + t.numel};
}

// `make_backend` is called once per SECTION run (Catch2 reruns the case for each).
void check_against_reference(const std::string& name, const std::function<std::unique_ptr<Backend>()>& make_backend) {
  H5File f(test::testdata_path("reference/" + name + ".h5"), H5File::Mode::kRead);
  const Reference ref = read_reference(f);
  auto backend = make_backend();
  GptModel model(*backend, ref.config, ref.batch);
  model.set_parameters(read_flat(f, model.registry(), "weights"));
  const double tokens_per_batch = double(ref.batch) * ref.config.seq_len;

  SECTION("forward: logits and loss") {
    auto tokens = f.read_ints("tokens");
    model.forward(tokens.data(), ref.batch);
    CHECK(max_norm_relative_error(model.download_logits(), f.read_floats("logits")) < 1e-5);
    const double loss = model.loss(float(1.0 / tokens_per_batch)) / tokens_per_batch;
    const double ref_loss = f.read_doubles("loss").at(0);
    CHECK(std::fabs(loss - ref_loss) / ref_loss < 1e-5);
  }

  SECTION("backward: every gradient tensor") {
    auto tokens = f.read_ints("tokens");
    model.zero_grads();
    model.train_micro_batch(tokens.data(), ref.batch, float(1.0 / tokens_per_batch));
    const auto grads = model.download_gradients();
    const auto ref_grads = read_flat(f, model.registry(), "grads");
    for (const auto& t : model.registry().tensors()) {
      INFO("gradient of " << t.name);
      CHECK(max_norm_relative_error(slice(grads, t), slice(ref_grads, t)) < 1e-4);
    }
  }

  SECTION("10 AdamW steps with clipping and the LR schedule") {
    auto all_tokens = f.read_ints("train/tokens");
    const auto ref_losses = f.read_doubles("train/losses");
    const auto ref_norms = f.read_doubles("train/grad_norms");
    const auto ref_lrs = f.read_doubles("train/lrs");
    StepRunner runner(model, ref.optimizer);
    const std::size_t per_step = std::size_t(ref.batch) * (ref.config.seq_len + 1);
    for (int s = 0; s < ref.steps; ++s) {
      INFO("step " << s);
      StepResult r = runner.run(s, all_tokens.data() + s * per_step, 1, ref.batch, tokens_per_batch);
      CHECK(std::fabs(r.loss_sum / tokens_per_batch - ref_losses[s]) / ref_losses[s] < 1e-5);
      CHECK(std::fabs(r.grad_norm - ref_norms[s]) / ref_norms[s] < 1e-5);
      CHECK(std::fabs(r.lr - ref_lrs[s]) / ref_lrs[s] < 1e-12);
    }
    const auto params = model.download_parameters();
    const auto ref_params = read_flat(f, model.registry(), "train/params");
    for (const auto& t : model.registry().tensors()) {
      INFO("final parameter " << t.name);
      CHECK(max_norm_relative_error(slice(params, t), slice(ref_params, t)) < 1e-4);
    }
  }
}

std::function<std::unique_ptr<Backend>()> cpu_with(int threads) {
  return [threads] { return make_cpu_backend(threads); };
}

// The CUDA backend in fp32 against the same files and tolerances (issue 15's proof on a device;
// [gpu]: skipped where no device is visible).
std::unique_ptr<Backend> cuda_fp32() { return make_cuda_backend(0, Precision::kFp32); }

}  // namespace

TEST_CASE("decoder matches the PyTorch reference: tiny config, 1 thread", "[model][reference]") {
  check_against_reference("tiny", cpu_with(1));
}
TEST_CASE("decoder matches the PyTorch reference: tiny config, 2 threads", "[model][reference]") {
  check_against_reference("tiny", cpu_with(2));
}
TEST_CASE("decoder matches the PyTorch reference: awkward sizes, 1 thread", "[model][reference]") {
  check_against_reference("awkward", cpu_with(1));
}
TEST_CASE("decoder matches the PyTorch reference: awkward sizes, 2 threads", "[model][reference]") {
  check_against_reference("awkward", cpu_with(2));
}
TEST_CASE("decoder on CUDA in fp32 matches the PyTorch reference: tiny config", "[gpu]") {
  check_against_reference("tiny", cuda_fp32);
}
TEST_CASE("decoder on CUDA in fp32 matches the PyTorch reference: awkward sizes", "[gpu]") {
  check_against_reference("awkward", cuda_fp32);
}
