#include "shardtrain/model/gpt.hpp"

#include "shardtrain/base/error.hpp"

namespace shardtrain {

GptModel::GptModel(Backend& backend, const ModelConfig& config, int max_batch, bool flat_storage)
    : backend_(backend), config_(config), registry_(config), max_batch_(max_batch) {
  if (max_batch < 1) throw UsageError("micro-batch must be at least 1 (got " + std::to_string(max_batch) + ")");
  const std::size_t B = max_batch, T = config.seq_len, C = config.d_model, V = config.vocab,
                    NH = config.n_head, N = B * T;
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
  logits_ = DeviceArray<float>(backend, N * V);
  losses_ = DeviceArray<float>(backend, N);
  scratch_ = DeviceArray<float>(backend, N * C);
  layers_.resize(config.n_layer);
  for (auto& a : layers_) {
    a.ln1 = DeviceArray<float>(backend, N * C);
    a.ln1_mean = DeviceArray<float>(backend, N);
    a.ln1_rstd = DeviceArray<float>(backend, N);
    a.qkv = DeviceArray<float>(backend, N * 3 * C);
    a.atty = DeviceArray<float>(backend, N * C);
    a.att = DeviceArray<float>(backend, backend.attention_state_elements(B, NH, T));
    a.res2 = DeviceArray<float>(backend, N * C);
    a.ln2 = DeviceArray<float>(backend, N * C);
    a.ln2_mean = DeviceArray<float>(backend, N);
    a.ln2_rstd = DeviceArray<float>(backend, N);
    a.fch = DeviceArray<float>(backend, N * 4 * C);
    a.fch_gelu = DeviceArray<float>(backend, N * 4 * C);
    a.res3 = DeviceArray<float>(backend, N * C);
  }
  dresidual_ = DeviceArray<float>(backend, N * C);
  dln_ = DeviceArray<float>(backend, N * C);
  datty_ = DeviceArray<float>(backend, N * C);
  dqkv_ = DeviceArray<float>(backend, N * 3 * C);
  dgelu_ = DeviceArray<float>(backend, N * 4 * C);
  dfch_ = DeviceArray<float>(backend, N * 4 * C);
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
  const std::size_t B = batch, T = config_.seq_len, C = config_.d_model, V = config_.vocab,
                    NH = config_.n_head, N = B * T;
  const int L = config_.n_layer;
  forward_begin(0);
  be.embedding_forward(encoded_.data(), inputs_.data(), param(registry_.wte()), param(registry_.wpe()), B, T, C);
  const float* x = encoded_.data();
  for (int l = 0; l < config_.n_layer; ++l) {
    const BlockOffsets& p = registry_.block(l);
    LayerActivations& a = layers_[l];
    forward_begin(l + 1);
    be.layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, param(p.ln1_w), param(p.ln1_b), N, C);
    be.matmul_forward(a.qkv.data(), a.ln1.data(), param(p.qkv_w), param(p.qkv_b), N, C, 3 * C);
    be.attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B, T, C, NH);
    be.matmul_forward(scratch_.data(), a.atty.data(), param(p.proj_w), param(p.proj_b), N, C, C);
    be.add(a.res2.data(), x, scratch_.data(), N * C);
    be.layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), param(p.ln2_w),
                         param(p.ln2_b), N, C);
    be.matmul_forward(a.fch.data(), a.ln2.data(), param(p.fc_w), param(p.fc_b), N, C, 4 * C);
    be.gelu_forward(a.fch_gelu.data(), a.fch.data(), N * 4 * C);
    be.matmul_forward(scratch_.data(), a.fch_gelu.data(), param(p.fc2_w), param(p.fc2_b), N, 4 * C, C);
    be.add(a.res3.data(), a.res2.data(), scratch_.data(), N * C);
    forward_end(l + 1);
    x = a.res3.data();
  }
  forward_begin(L + 1);
  be.layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x, param(registry_.lnf_w()),
                       param(registry_.lnf_b()), N, C);
  forward_end(L + 1);
  be.matmul_forward(logits_.data(), lnf_.data(), param(registry_.wte()), nullptr, N, C, V);
  forward_end(0);
  have_dlogits_ = false;
}

std::vector<float> GptModel::download_logits() const {
  std::vector<float> out(std::size_t(batch_) * config_.seq_len * config_.vocab);
  logits_.download(out.data(), out.size());
  return out;
}

double GptModel::loss(float dloss_scale) {
  const std::size_t N = std::size_t(batch_) * config_.seq_len;
  backend_.crossentropy_forward_backward(losses_.data(), logits_.data(), targets_.data(), N, config_.vocab,
                                         dloss_scale);
  have_dlogits_ = true;
  return backend_.sum(losses_.data(), N);
}

void GptModel::backward() {
  if (!have_dlogits_) throw Error(ExitCode::kInternal, "GptModel::backward called without forward and loss");
  Backend& be = backend_;
  const std::size_t B = batch_, T = config_.seq_len, C = config_.d_model, V = config_.vocab,
                    NH = config_.n_head, N = B * T;
  const int L = config_.n_layer;
  // LM head (tied): logits = lnf @ wte^T
  backward_begin(0);
  backward_begin(L + 1);
  be.matmul_backward(dln_.data(), grad(registry_.wte()), nullptr, logits_.data(), lnf_.data(),
                     param(registry_.wte()), N, C, V);
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
                       param(p.fc2_w), N, 4 * C, C);
    be.gelu_backward(dfch_.data(), a.fch.data(), dgelu_.data(), N * 4 * C);
    be.matmul_backward(dln_.data(), grad(p.fc_w), grad(p.fc_b), dfch_.data(), a.ln2.data(), param(p.fc_w), N, C,
                       4 * C);
    be.layernorm_backward(dresidual_.data(), grad(p.ln2_w), grad(p.ln2_b), dln_.data(), a.res2.data(),
                          param(p.ln2_w), a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
    // Attention branch: dresidual now holds d(res2).
    be.matmul_backward(datty_.data(), grad(p.proj_w), grad(p.proj_b), dresidual_.data(), a.atty.data(),
                       param(p.proj_w), N, C, C);
    be.attention_backward(dqkv_.data(), datty_.data(), a.qkv.data(), a.att.data(), B, T, C, NH);
    be.matmul_backward(dln_.data(), grad(p.qkv_w), grad(p.qkv_b), dqkv_.data(), a.ln1.data(), param(p.qkv_w), N,
                       C, 3 * C);
    be.layernorm_backward(dresidual_.data(), grad(p.ln1_w), grad(p.ln1_b), dln_.data(), x_in, param(p.ln1_w),
                          a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
    backward_end(l + 1);
  }
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

std::size_t GptModel::activation_bytes_for(const ModelConfig& config, int max_batch) {
  const std::size_t B = max_batch, T = config.seq_len, C = config.d_model, V = config.vocab, NH = config.n_head,
                    N = B * T;
  const std::size_t per_layer = 16 * N * C + 4 * N + B * NH * T * T;
  const std::size_t global = 17 * N * C + 3 * N + N * V;
  return (global + per_layer * std::size_t(config.n_layer)) * sizeof(float);
}

std::size_t GptModel::activation_bytes() const {
  std::size_t bytes = encoded_.bytes() + lnf_.bytes() + lnf_mean_.bytes() + lnf_rstd_.bytes() + logits_.bytes() +
                      losses_.bytes() + scratch_.bytes() + dresidual_.bytes() + dln_.bytes() + datty_.bytes() +
                      dqkv_.bytes() + dgelu_.bytes() + dfch_.bytes();
  for (const auto& a : layers_)
    bytes += a.ln1.bytes() + a.ln1_mean.bytes() + a.ln1_rstd.bytes() + a.qkv.bytes() + a.atty.bytes() +
             a.att.bytes() + a.res2.bytes() + a.ln2.bytes() + a.ln2_mean.bytes() + a.ln2_rstd.bytes() +
             a.fch.bytes() + a.fch_gelu.bytes() + a.res3.bytes();
  return bytes;
}

}  // namespace shardtrain
