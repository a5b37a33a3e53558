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
//
// Tensor parallelism (Megatron-LM's split; a `tp` communicator of T > 1 ranks): the model holds
// this rank's local tensors (parameters.hpp: qkv and fc column-parallel, attn.proj and mlp.proj
// row-parallel, wte and the tied LM head vocab-parallel, the rest replicated) and every rank of
// the group runs every forward, loss and backward together, with the conjugate pairs:
//   f (identity forward, all-reduce of the input gradient backward): before qkv, before fc, before
//     the LM head, each on the LayerNorm output's gradient;
//   g (all-reduce forward, identity backward): after attn.proj and mlp.proj (their replicated bias
//     added once, on TP rank 0, before the sum), after the vocab-parallel embedding lookup.
// The loss is the vocab-parallel cross-entropy: row maxima all-gathered, sums of exponentials and
// the target logit all-reduced; the (B,T,V) logits are never gathered. Replicated tensors get
// bitwise-identical gradients on every TP rank because every input to their gradients has been
// summed by the same all-reduce. The sums over the group run on the tp communicator, so the TP
// traffic has its own sequence numbers, flight record and accounting.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/model/parameters.hpp"

namespace shardtrain {

// Per-unit parameter and gradient storage (ZeRO-2/3, FSDP): when set on a model, the model reads
// unit u's parameters from params(u) and accumulates its gradients into grads(u) -- buffers of
// the unit's size (registry().units()[u]) with the flat layout's relative offsets -- instead of
// the flat buffers, and calls the hooks around every use, in this order per micro-batch:
//   forward:  begin(0) [embeddings], then per block l: begin(l+1) ... end(l+1), then begin(L+1)
//             [ln_f] ... end(L+1), then the tied LM head reads unit 0 and end(0);
//   backward: begin(0), begin(L+1) (LM head and ln_f), end(L+1), per block l = L-1..0:
//             begin(l+1) ... end(l+1), then the embedding backward and end(0).
// params(u) is read after forward_begin(u)/backward_begin(u); grads(u) after backward_begin(u);
// backward_end(u) means the unit's gradient of this micro-batch is complete.
class UnitStorage {
 public:
  virtual ~UnitStorage() = default;
  virtual void forward_begin(int unit) = 0;
  virtual void forward_end(int unit) = 0;
  virtual void backward_begin(int unit) = 0;
  virtual void backward_end(int unit) = 0;
  virtual const float* params(int unit) = 0;
  virtual float* grads(int unit) = 0;
};

class GptModel {
 public:
  // flat_storage false: no flat parameter/gradient buffers are allocated; a UnitStorage must be
  // set before forward (params(), grads(), set_parameters and the downloads are then unusable).
  // tp: the tensor-parallel group (nullptr or size 1: the unsplit model). Its size must divide
  // n_head and 4 * d_model (UsageError otherwise).
  GptModel(Backend& backend, const ModelConfig& config, int max_batch, bool flat_storage = true,
           Communicator* tp = nullptr);

  const ModelConfig& config() const { return config_; }
  const ParameterRegistry& registry() const { return registry_; }
  Backend& backend() { return backend_; }
  const Backend& backend() const { return backend_; }
  int max_batch() const { return max_batch_; }

  // Flat buffers of registry().total() floats, device-resident.
  DeviceArray<float>& params() { return params_; }
  const DeviceArray<float>& params() const { return params_; }
  DeviceArray<float>& grads() { return grads_; }
  void zero_grads();

  // Uploads the whole flat parameter vector (host, registry order).
  void set_parameters(const std::vector<float>& flat);
  std::vector<float> download_parameters() const;
  std::vector<float> download_gradients() const;

  // Forward over `batch` sequences of tokens (B, T+1); leaves logits (B,T,V) in the activations.
  void forward(const int32_t* tokens, int batch);
  // Logits of the last forward (B*T*V floats; under TP this rank's (B,T,Vp/T) slice, padding
  // columns included); valid until the loss is computed.
  std::vector<float> download_logits() const;
  // Cross-entropy of the last forward's logits against its targets (uploaded by forward with the
  // tokens); replaces the logits by dloss_scale * d(sum of losses)/d(logits). Returns the *sum*
  // of the B*T losses.
  double loss(float dloss_scale);
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

  // Per-unit storage instead of the flat buffers (nullptr: the flat buffers, the default).
  void set_unit_storage(UnitStorage* storage);

  // Bytes of activations and gradient scratch held for backward.
  std::size_t activation_bytes() const;
  // The same, before building a model (memory budgets), per rank of a TP group of `tp`.
  static std::size_t activation_bytes_for(const ModelConfig& config, int max_batch, int tp, DeviceKind device);

  // The tensor-parallel group (nullptr when unsplit) and this rank's place in it.
  Communicator* tensor_parallel_comm() const { return tp_; }
  const TensorParallelPlace& place() const { return registry_.place(); }

 private:
  struct LayerActivations {
    DeviceArray<float> ln1, ln1_mean, ln1_rstd, qkv, atty, att, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, res3;
  };
  void upload_tokens(const int32_t* tokens, int batch);
  // Sum over the TP group, in place (no-op when unsplit).
  void tp_sum(float* data, std::size_t n);
  double vocab_parallel_loss(float dloss_scale);
  int unit_of(std::size_t offset) const;
  const float* param(std::size_t offset) const {
    if (!storage_) return params_.data() + offset;
    const int u = unit_of(offset);
    return unit_params_[u] + (offset - registry_.units()[u].begin);
  }
  float* grad(std::size_t offset) {
    if (!storage_) return grads_.data() + offset;
    const int u = unit_of(offset);
    return unit_grads_[u] + (offset - registry_.units()[u].begin);
  }
  void forward_begin(int u);
  void forward_end(int u);
  void backward_begin(int u);
  void backward_end(int u);

  Backend& backend_;
  ModelConfig config_;
  Communicator* tp_ = nullptr;
  ParameterRegistry registry_;
  // Local widths: attention C/T, heads NH/T, MLP 4C/T, vocabulary Vp/T (the unsplit ones at T = 1),
  // this rank's first vocabulary row and how many of its rows are real (not padding).
  std::size_t attn_c_, heads_, mlp_c_, vocab_local_, vocab_begin_, vocab_valid_;
  int max_batch_;
  int batch_ = 0;  // B of the last forward
  bool have_dlogits_ = false;
  GradientReadyHook ready_hook_;
  UnitStorage* storage_ = nullptr;
  std::vector<const float*> unit_params_;
  std::vector<float*> unit_grads_;

  DeviceArray<float> params_, grads_;
  DeviceArray<int32_t> inputs_, targets_;
  DeviceArray<float> encoded_, lnf_, lnf_mean_, lnf_rstd_, logits_, losses_, scratch_;
  DeviceArray<float> ce_stats_;  // vocab-parallel cross-entropy: row maxima, then (sum exp, target)
  DeviceArray<float> ce_max_;    // the group's row maxima
  std::vector<LayerActivations> layers_;
  // Backward scratch.
  DeviceArray<float> dresidual_, dln_, datty_, dqkv_, dgelu_, dfch_;
};

}  // namespace shardtrain
