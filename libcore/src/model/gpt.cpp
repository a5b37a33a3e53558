#include "shardtrain/model/gpt.hpp"

#include <algorithm>
#include <cmath>

#include "shardtrain/base/error.hpp"

namespace shardtrain {

namespace {
TensorParallelPlace place_of(Communicator* tp) {
  return tp ? TensorParallelPlace{tp->size(), tp->rank()} : TensorParallelPlace{};
}
}  // namespace

GptModel::GptModel(Backend& backend, const ModelConfig& config, int max_batch, bool flat_storage, Communicator* tp)
    : backend_(backend),
      config_(config),
      tp_(tp && tp->size() > 1 ? tp : nullptr),
      registry_(config, place_of(tp_)),
      max_batch_(max_batch) {
  if (max_batch < 1) throw UsageError("micro-batch must be at least 1 (got " + std::to_string(max_batch) + ")");
  const std::size_t tps = std::size_t(registry_.place().size);
  attn_c_ = std::size_t(config.d_model) / tps;
  heads_ = std::size_t(config.n_head) / tps;
  mlp_c_ = 4 * std::size_t(config.d_model) / tps;
  vocab_local_ = std::size_t(padded_vocab(config, int(tps))) / tps;
  vocab_begin_ = vocab_local_ * std::size_t(registry_.place().rank);
  vocab_valid_ = vocab_begin_ >= std::size_t(config.vocab)
                     ? 0
                     : std::min(vocab_local_, std::size_t(config.vocab) - vocab_begin_);
  const std::size_t B = max_batch, T = config.seq_len, C = config.d_model, N = B * T;
  if (flat_storage) {
    params_ = DeviceArray<float>(backend, registry_.total());
    grads_ = DeviceArray<float>(backend, registry_.total());
  }
  unit_params_.assign(registry_.units().size(), nullptr);
  unit_grads_.assign(registry_.units().size(), nullptr);
  inputs_ = DeviceArray<int32_t>(backend, N);
  targets_ = DeviceArray<int32_t>(backend, N);
  encoded_ = DeviceArray<float>(backend, N * C);
  lnf_ = DeviceArray<float>(backend, N * C);
  lnf_mean_ = DeviceArray<float>(backend, N);
  lnf_rstd_ = DeviceArray<float>(backend, N);
  logits_ = DeviceArray<float>(backend, N * vocab_local_);
  losses_ = DeviceArray<float>(backend, N);
  scratch_ = DeviceArray<float>(backend, N * C);
  if (tp_) {
    ce_stats_ = DeviceArray<float>(backend, 2 * N);
    ce_max_ = DeviceArray<float>(backend, N);
  }
  layers_.resize(config.n_layer);
  for (auto& a : layers_) {
    a.ln1 = DeviceArray<float>(backend, N * C);
    a.ln1_mean = DeviceArray<float>(backend, N);
    a.ln1_rstd = DeviceArray<float>(backend, N);
    a.qkv = DeviceArray<float>(backend, N * 3 * attn_c_);
    a.atty = DeviceArray<float>(backend, N * attn_c_);
    a.att = DeviceArray<float>(backend, backend.attention_state_elements(B, heads_, T));
    a.res2 = DeviceArray<float>(backend, N * C);
    a.ln2 = DeviceArray<float>(backend, N * C);
    a.ln2_mean = DeviceArray<float>(backend, N);
    a.ln2_rstd = DeviceArray<float>(backend, N);
    a.fch = DeviceArray<float>(backend, N * mlp_c_);
    a.fch_gelu = DeviceArray<float>(backend, N * mlp_c_);
    a.res3 = DeviceArray<float>(backend, N * C);
  }
  dresidual_ = DeviceArray<float>(backend, N * C);
  dln_ = DeviceArray<float>(backend, N * C);
  datty_ = DeviceArray<float>(backend, N * attn_c_);
  dqkv_ = DeviceArray<float>(backend, N * 3 * attn_c_);
  dgelu_ = DeviceArray<float>(backend, N * mlp_c_);
  dfch_ = DeviceArray<float>(backend, N * mlp_c_);
}

void GptModel::tp_sum(float* data, std::size_t n) {
  if (!tp_) return;
  backend_.synchronize();
  tp_->all_reduce(data, n);
}

void GptModel::set_unit_storage(UnitStorage* storage) { storage_ = storage; }

int GptModel::unit_of(std::size_t offset) const {
  const auto& units = registry_.units();
  int lo = 0, hi = int(units.size()) - 1;  // last unit whose begin <= offset
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (units[mid].begin <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

void GptModel::forward_begin(int u) {
  if (!storage_) return;
  storage_->forward_begin(u);
  unit_params_[u] = storage_->params(u);
}
void GptModel::forward_end(int u) {
  if (storage_) storage_->forward_end(u);
}
void GptModel::backward_begin(int u) {
  if (!storage_) return;
  storage_->backward_begin(u);
  unit_params_[u] = storage_->params(u);
  unit_grads_[u] = storage_->grads(u);
}
// Unit u's gradient of this micro-batch is complete: tell the unit storage (ZeRO) and the
// gradient-ready hook (DDP buckets), which sees it as "[begin of unit u, end) is complete"
// since backward completes the units from the last to the first.
void GptModel::backward_end(int u) {
  if (storage_) storage_->backward_end(u);
  if (ready_hook_) ready_hook_(registry_.units()[u].begin);
}

void GptModel::zero_grads() { backend_.fill(grads_.data(), grads_.size(), 0.0f); }

void GptModel::set_parameters(const std::vector<float>& flat) {
  if (flat.size() != registry_.total())
    throw UsageError("parameter vector has " + std::to_string(flat.size()) + " elements, the model needs " +
                     std::to_string(registry_.total()));
  params_.upload(flat.data(), flat.size());
}

std::vector<float> GptModel::download_parameters() const {
  std::vector<float> out(params_.size());
  params_.download(out.data(), out.size());
  return out;
}

std::vector<float> GptModel::download_gradients() const {
  std::vector<float> out(grads_.size());
  grads_.download(out.data(), out.size());
  return out;
}

void GptModel::upload_tokens(const int32_t* tokens, int batch) {
  if (batch < 1 || batch > max_batch_)
    throw UsageError("micro-batch of " + std::to_string(batch) + " sequences exceeds the model's maximum " +
                     std::to_string(max_batch_));
  const std::size_t T = config_.seq_len;
  std::vector<int32_t> in(batch * T), tg(batch * T);
  for (int b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < T; ++t) {
      const int32_t x = tokens[b * (T + 1) + t], y = tokens[b * (T + 1) + t + 1];
      if (x < 0 || x >= config_.vocab || y < 0 || y >= config_.vocab)
        throw UsageError("token id " + std::to_string(x < 0 || x >= config_.vocab ? x : y) +
                         " is outside the model's vocabulary [0, " + std::to_string(config_.vocab) + ")");
      in[b * T + t] = x;
      tg[b * T + t] = y;
    }
  inputs_.upload(in.data(), in.size());
  targets_.upload(tg.data(), tg.size());
  batch_ = batch;
}

void GptModel::forward(const int32_t* tokens, int batch) {
  upload_tokens(tokens, batch);
  Backend& be = backend_;
  const std::size_t B = batch, T = config_.seq_len, C = config_.d_model, N = B * T;
  const std::size_t AC = attn_c_, NH = heads_, F = mlp_c_;
  const int L = config_.n_layer;
  // The replicated biases of the row-parallel projections join the TP sum once (rank 0's term).
  const bool add_row_bias = place().rank == 0;
  forward_begin(0);
  if (tp_) {  // vocab-parallel lookup, wpe added once, then g: the group's sum
    be.embedding_forward_slice(encoded_.data(), inputs_.data(), param(registry_.wte()),
                               add_row_bias ? param(registry_.wpe()) : nullptr, B, T, C, vocab_begin_, vocab_local_);
    tp_sum(encoded_.data(), N * C);
  } else {
    be.embedding_forward(encoded_.data(), inputs_.data(), param(registry_.wte()), param(registry_.wpe()), B, T, C);
  }
  const float* x = encoded_.data();
  for (int l = 0; l < config_.n_layer; ++l) {
    const BlockOffsets& p = registry_.block(l);
    LayerActivations& a = layers_[l];
    forward_begin(l + 1);
    be.layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, param(p.ln1_w), param(p.ln1_b), N, C);
    be.matmul_forward(a.qkv.data(), a.ln1.data(), param(p.qkv_w), param(p.qkv_b), N, C, 3 * AC);
    be.attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B, T, AC, NH);
    be.matmul_forward(scratch_.data(), a.atty.data(), param(p.proj_w), add_row_bias ? param(p.proj_b) : nullptr, N,
                      AC, C);
    tp_sum(scratch_.data(), N * C);
    be.add(a.res2.data(), x, scratch_.data(), N * C);
    be.layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), param(p.ln2_w),
                         param(p.ln2_b), N, C);
    be.matmul_forward(a.fch.data(), a.ln2.data(), param(p.fc_w), param(p.fc_b), N, C, F);
    be.gelu_forward(a.fch_gelu.data(), a.fch.data(), N * F);
    be.matmul_forward(scratch_.data(), a.fch_gelu.data(), param(p.fc2_w), add_row_bias ? param(p.fc2_b) : nullptr,
                      N, F, C);
    tp_sum(scratch_.data(), N * C);
    be.add(a.res3.data(), a.res2.data(), scratch_.data(), N * C);
    forward_end(l + 1);
    x = a.res3.data();
  }
  forward_begin(L + 1);
  be.layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x, param(registry_.lnf_w()),
                       param(registry_.lnf_b()), N, C);
  forward_end(L + 1);
  be.matmul_forward(logits_.data(), lnf_.data(), param(registry_.wte()), nullptr, N, C, vocab_local_);
  forward_end(0);
  have_dlogits_ = false;
}

std::vector<float> GptModel::download_logits() const {
  std::vector<float> out(std::size_t(batch_) * config_.seq_len * vocab_local_);
  logits_.download(out.data(), out.size());
  return out;
}

// Megatron's vocab-parallel cross-entropy: loss_r = log(sum over the group of exp(logit - max))
// - (logit[target] - max), with max the group's row maximum; the logits never leave their rank.
double GptModel::vocab_parallel_loss(float dloss_scale) {
  const std::size_t N = std::size_t(batch_) * config_.seq_len, T = std::size_t(tp_->size());
  float* row_max = ce_stats_.data();
  backend_.crossentropy_slice_max(row_max, logits_.data(), N, vocab_local_, vocab_valid_);
  backend_.synchronize();
  std::vector<float> mine(N), every(N * T);
  ce_stats_.download(mine.data(), N);
  tp_->all_gather(mine.data(), every.data(), N);
  std::vector<float> global_max(every.begin(), every.begin() + std::ptrdiff_t(N));  // TP rank 0's, then the rest
  for (std::size_t r = 1; r < T; ++r)
    for (std::size_t i = 0; i < N; ++i) global_max[i] = std::max(global_max[i], every[r * N + i]);
  ce_max_.upload(global_max.data(), N);
  backend_.crossentropy_slice_exp(ce_stats_.data(), logits_.data(), ce_max_.data(), targets_.data(), N,
                                  vocab_local_, vocab_valid_, vocab_begin_);
  tp_sum(ce_stats_.data(), 2 * N);  // sums of exponentials, target terms
  std::vector<float> stats(2 * N);
  ce_stats_.download(stats.data(), 2 * N);
  std::vector<float> losses(N);
  for (std::size_t i = 0; i < N; ++i) losses[i] = std::log(stats[i]) - stats[N + i];
  losses_.upload(losses.data(), N);
  backend_.crossentropy_slice_backward(logits_.data(), ce_stats_.data(), targets_.data(), N, vocab_local_,
                                       vocab_begin_, dloss_scale);
  have_dlogits_ = true;
  return backend_.sum(losses_.data(), N);
}

double GptModel::loss(float dloss_scale) {
  if (tp_) return vocab_parallel_loss(dloss_scale);
  const std::size_t N = std::size_t(batch_) * config_.seq_len;
  backend_.crossentropy_forward_backward(losses_.data(), logits_.data(), targets_.data(), N, config_.vocab,
                                         dloss_scale);
  have_dlogits_ = true;
  return backend_.sum(losses_.data(), N);
}

void GptModel::backward() {
  if (!have_dlogits_) throw Error(ExitCode::kInternal, "GptModel::backward called without forward and loss");
  Backend& be = backend_;
  const std::size_t B = batch_, T = config_.seq_len, C = config_.d_model, N = B * T;
  const std::size_t AC = attn_c_, NH = heads_, F = mlp_c_;
  const int L = config_.n_layer;
  // LM head (tied): logits = lnf @ wte^T; f: the group sums d(lnf) before the LayerNorm.
  backward_begin(0);
  backward_begin(L + 1);
  be.matmul_backward(dln_.data(), grad(registry_.wte()), nullptr, logits_.data(), lnf_.data(),
                     param(registry_.wte()), N, C, vocab_local_);
  tp_sum(dln_.data(), N * C);
  be.fill(dresidual_.data(), N * C, 0.0f);
  be.layernorm_backward(dresidual_.data(), grad(registry_.lnf_w()), grad(registry_.lnf_b()), dln_.data(),
                        layers_[L - 1].res3.data(), param(registry_.lnf_w()), lnf_mean_.data(), lnf_rstd_.data(),
                        N, C);
  backward_end(L + 1);
  for (int l = L - 1; l >= 0; --l) {
    const BlockOffsets& p = registry_.block(l);
    LayerActivations& a = layers_[l];
    backward_begin(l + 1);
    const float* x_in = l == 0 ? encoded_.data() : layers_[l - 1].res3.data();
    // MLP branch: dresidual holds d(res3).
    be.matmul_backward(dgelu_.data(), grad(p.fc2_w), grad(p.fc2_b), dresidual_.data(), a.fch_gelu.data(),
                       param(p.fc2_w), N, F, C);
    be.gelu_backward(dfch_.data(), a.fch.data(), dgelu_.data(), N * F);
    be.matmul_backward(dln_.data(), grad(p.fc_w), grad(p.fc_b), dfch_.data(), a.ln2.data(), param(p.fc_w), N, C, F);
    tp_sum(dln_.data(), N * C);
    be.layernorm_backward(dresidual_.data(), grad(p.ln2_w), grad(p.ln2_b), dln_.data(), a.res2.data(),
                          param(p.ln2_w), a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
    // Attention branch: dresidual now holds d(res2).
    be.matmul_backward(datty_.data(), grad(p.proj_w), grad(p.proj_b), dresidual_.data(), a.atty.data(),
                       param(p.proj_w), N, AC, C);
    be.attention_backward(dqkv_.data(), datty_.data(), a.qkv.data(), a.att.data(), B, T, AC, NH);
    be.matmul_backward(dln_.data(), grad(p.qkv_w), grad(p.qkv_b), dqkv_.data(), a.ln1.data(), param(p.qkv_w), N,
                       C, 3 * AC);
    tp_sum(dln_.data(), N * C);
    be.layernorm_backward(dresidual_.data(), grad(p.ln1_w), grad(p.ln1_b), dln_.data(), x_in, param(p.ln1_w),
                          a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
    backward_end(l + 1);
  }
  if (tp_)
    be.embedding_backward_slice(grad(registry_.wte()), grad(registry_.wpe()), dresidual_.data(), inputs_.data(), B,
                                T, C, vocab_begin_, vocab_local_);
  else
    be.embedding_backward(grad(registry_.wte()), grad(registry_.wpe()), dresidual_.data(), inputs_.data(), B, T, C);
  backward_end(0);
  have_dlogits_ = false;
}

double GptModel::train_micro_batch(const int32_t* tokens, int batch, float dloss_scale) {
  forward(tokens, batch);
  const double loss_sum = loss(dloss_scale);
  backward();
  return loss_sum;
}

double GptModel::eval_micro_batch(const int32_t* tokens, int batch) {
  forward(tokens, batch);
  const double loss_sum = loss(0.0f);
  have_dlogits_ = false;
  return loss_sum;
}

// Per layer: ln1, res2, ln2, res3 (N*C each, replicated under TP), qkv 3AC, atty AC, fch and
// fch_gelu 4C/T each, four LayerNorm statistics (N), what attention keeps for backward (backend.hpp
// attention_state_elements_for: B*NH/T*T*T probabilities on the CPU, B*NH/T*T on CUDA).
// Global: encoded, lnf, scratch, dresidual, dln (N*C), datty AC, dqkv 3AC, dgelu and dfch 4C/T,
// lnf statistics and losses (3N), the logits N*Vp/T and under TP the cross-entropy statistics 3N.
std::size_t GptModel::activation_bytes_for(const ModelConfig& config, int max_batch, int tp, DeviceKind device) {
  const std::size_t B = max_batch, T = config.seq_len, C = config.d_model, NH = std::size_t(config.n_head) / tp,
                    N = B * T, AC = C / tp, F = 4 * C / tp, V = std::size_t(padded_vocab(config, tp)) / tp;
  // What attention keeps for backward is the backend's to say (B*NH*T*T on the CPU, B*NH*T fused on CUDA).
  const std::size_t per_layer = 4 * N * C + 4 * N * AC + 2 * N * F + 4 * N + attention_state_elements_for(device, B, NH, T);
  const std::size_t global = 5 * N * C + 4 * N * AC + 2 * N * F + 3 * N + N * V + (tp > 1 ? 3 * N : 0);
  return (global + per_layer * std::size_t(config.n_layer)) * sizeof(float);
}

std::size_t GptModel::activation_bytes() const {
  std::size_t bytes = encoded_.bytes() + lnf_.bytes() + lnf_mean_.bytes() + lnf_rstd_.bytes() + logits_.bytes() +
                      losses_.bytes() + ce_stats_.bytes() + ce_max_.bytes() + scratch_.bytes() + dresidual_.bytes() + dln_.bytes() + datty_.bytes() +
                      dqkv_.bytes() + dgelu_.bytes() + dfch_.bytes();
  for (const auto& a : layers_)
    bytes += a.ln1.bytes() + a.ln1_mean.bytes() + a.ln1_rstd.bytes() + a.qkv.bytes() + a.atty.bytes() +
             a.att.bytes() + a.res2.bytes() + a.ln2.bytes() + a.ln2_mean.bytes() + a.ln2_rstd.bytes() +
             a.fch.bytes() + a.fch_gelu.bytes() + a.res3.bytes();
  return bytes;
}

}  // namespace shardtrain
