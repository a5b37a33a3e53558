// The GPT-2 style decoder: forward and hand-written backward over flat parameter and gradient
// buffers, on any Backend.
//
//   x0 = wte[tokens] + wpe[t]                                   (B,T,C)
//   per block l:  x = x + attn.proj(attention(attn.qkv(ln_1(x))))
//                 x = x + mlp.proj(gelu_tanh(mlp.fc(ln_2(x))))
//   logits = ln_f(x) @ wte^T                                     (B,T,V), LM head tied to wte
//   loss = mean over the B*T positions of cross-entropy(logits, targets)
//
// A micro-batch is `tokens` (B, T+1) int32 on the host: inputs are columns [0,T), targets [1,T].
// The model keeps the activations of the last forward for backward, sized for `max_batch`.
// Gradients *accumulate* into grads() (call zero_grads() at the start of a step), so gradient
// accumulation over micro-batches is a loop of train_micro_batch calls.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "shardtrain/backend.hpp"
#include "shardtrain/model_config.hpp"
#include "shardtrain/parameters.hpp"

namespace shardtrain {

class GptModel {
 public:
  GptModel(Backend& backend, const ModelConfig& config, int max_batch);

  const ModelConfig& config() const { return config_; }
  const ParameterRegistry& registry() const { return registry_; }
  Backend& backend() { return backend_; }
  int max_batch() const { return max_batch_; }

  // Flat buffers of registry().total() floats, device-resident.
  DeviceArray<float>& params() { return params_; }
  DeviceArray<float>& grads() { return grads_; }
  void zero_grads();

  // Uploads the whole flat parameter vector (host, registry order).
  void set_parameters(const std::vector<float>& flat);
  std::vector<float> download_parameters() const;
  std::vector<float> download_gradients() const;

  // Forward over `batch` sequences of tokens (B, T+1); leaves logits (B,T,V) in the activations.
  void forward(const int32_t* tokens, int batch);
  // Logits of the last forward (B*T*V floats); valid until the loss is computed.
  std::vector<float> download_logits() const;
  // Cross-entropy of the last forward's logits against the targets of `tokens`; replaces the
  // logits by dloss_scale * d(sum of losses)/d(logits). Returns the *sum* of the B*T losses.
  double loss(const int32_t* tokens, float dloss_scale);
  // Backward of the last forward + loss; accumulates parameter gradients into grads().
  void backward();

  // forward + loss + backward; returns the sum of the B*T token losses. dloss_scale is the
  // weight of each token's loss in the objective (1 / tokens in the global batch for a mean).
  double train_micro_batch(const int32_t* tokens, int batch, float dloss_scale);
  // forward + loss without gradients: the sum of the B*T token losses (evaluation).
  double eval_micro_batch(const int32_t* tokens, int batch);

  // Called during backward each time the gradients of the flat range [ready_from, total) are
  // complete: after ln_f, after each block (from the last to the first), and after the
  // embeddings (ready_from 0). Data parallelism starts bucket all-reduces from it.
  using GradientReadyHook = std::function<void(std::size_t ready_from)>;
  void set_gradient_ready_hook(GradientReadyHook hook) { ready_hook_ = std::move(hook); }

  // Bytes of activations and gradient scratch held for backward.
  std::size_t activation_bytes() const;

 private:
  struct LayerActivations {
    DeviceArray<float> ln1, ln1_mean, ln1_rstd, qkv, atty, att, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, res3;
  };
  void upload_tokens(const int32_t* tokens, int batch);
  const float* param(std::size_t offset) const { return params_.data() + offset; }
  float* grad(std::size_t offset) { return grads_.data() + offset; }

  Backend& backend_;
  ModelConfig config_;
  ParameterRegistry registry_;
  int max_batch_;
  int batch_ = 0;  // B of the last forward
  bool have_dlogits_ = false;
  GradientReadyHook ready_hook_;

  DeviceArray<float> params_, grads_;
  DeviceArray<int32_t> inputs_, targets_;
  DeviceArray<float> encoded_, lnf_, lnf_mean_, lnf_rstd_, logits_, losses_, scratch_;
  std::vector<LayerActivations> layers_;
  // Backward scratch.
  DeviceArray<float> dresidual_, dln_, datty_, dqkv_, dgelu_, dfch_;
};

}  // namespace shardtrain
