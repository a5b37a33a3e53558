// The naive reference kernels (declared in naive_kernels.hpp), and self-checks of their
// hand-derived backward passes against central finite differences of their own forward passes,
// all in double. (This file holds the implementations so that the tests/test_*.cpp glob builds
// them into the test executable.)
#include "naive_kernels.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "test_support.hpp"

namespace shardtrain::naive {

Vec to_double(const std::vector<float>& x) { return Vec(x.begin(), x.end()); }

std::vector<float> to_float(const Vec& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i]);
  return out;
}

// ---------------------------------------------------------------- elementwise

namespace {
constexpr double kPi = 3.14159265358979323846;
constexpr double kGeluA = 0.044715;
double gelu_s() { return std::sqrt(2.0 / kPi); }
}  // namespace

double gelu(double x) {
  double u = gelu_s() * (x + kGeluA * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

double gelu_derivative(double x) {
  double u = gelu_s() * (x + kGeluA * x * x * x);
  double t = std::tanh(u);
  double du_dx = gelu_s() * (1.0 + 3.0 * kGeluA * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx;
}

void gelu_forward(Vec& out, const Vec& in) {
  out.assign(in.size(), 0.0);
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = gelu(in[i]);
}

void gelu_backward(Vec& din, const Vec& in, const Vec& dout) {
  din.assign(in.size(), 0.0);
  for (std::size_t i = 0; i < in.size(); ++i) din[i] = dout[i] * gelu_derivative(in[i]);
}

// ---------------------------------------------------------------- layer norm

void layernorm_forward(Vec& out, Vec& mean, Vec& rstd, const Vec& in, const Vec& weight,
                       const Vec& bias, std::size_t rows, std::size_t channels) {
  out.assign(rows * channels, 0.0);
  mean.assign(rows, 0.0);
  rstd.assign(rows, 0.0);
  for (std::size_t n = 0; n < rows; ++n) {
    const double* x = &in[n * channels];
    double m = 0.0;
    for (std::size_t c = 0; c < channels; ++c) m += x[c];
    m /= double(channels);
    double var = 0.0;  // biased variance, two-pass
    for (std::size_t c = 0; c < channels; ++c) var += (x[c] - m) * (x[c] - m);
    var /= double(channels);
    double rs = 1.0 / std::sqrt(var + kLayerNormEps);
    for (std::size_t c = 0; c < channels; ++c)
      out[n * channels + c] = (x[c] - m) * rs * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = rs;
  }
}

// With xhat = (x - mean) * rstd and y = xhat * w + b, per row:
//   dbias += dy;  dweight += dy * xhat;  dxhat = dy * w
//   dx = rstd * (dxhat - mean_c(dxhat) - xhat * mean_c(dxhat * xhat))
// (mean and rstd are functions of x; the two mean_c terms are their contributions.)
void layernorm_backward(Vec& din, Vec& dweight, Vec& dbias, const Vec& dout, const Vec& in,
                        const Vec& weight, const Vec& mean, const Vec& rstd, std::size_t rows,
                        std::size_t channels) {
  for (std::size_t n = 0; n < rows; ++n) {
    const double* x = &in[n * channels];
    const double* dy = &dout[n * channels];
    double mean_dxhat = 0.0, mean_dxhat_xhat = 0.0;
    for (std::size_t c = 0; c < channels; ++c) {
      double xhat = (x[c] - mean[n]) * rstd[n];
      double dxhat = dy[c] * weight[c];
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * xhat;
    }
    mean_dxhat /= double(channels);
    mean_dxhat_xhat /= double(channels);
    for (std::size_t c = 0; c < channels; ++c) {
      double xhat = (x[c] - mean[n]) * rstd[n];
      double dxhat = dy[c] * weight[c];
      dbias[c] += dy[c];
      dweight[c] += dy[c] * xhat;
      din[n * channels + c] += rstd[n] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

// ---------------------------------------------------------------- matmul

void matmul_forward(Vec& out, const Vec& in, const Vec& weight, const Vec* bias, std::size_t rows,
                    std::size_t in_channels, std::size_t out_channels) {
  out.assign(rows * out_channels, 0.0);
  for (std::size_t n = 0; n < rows; ++n)
    for (std::size_t o = 0; o < out_channels; ++o) {
      double acc = bias ? (*bias)[o] : 0.0;
      for (std::size_t c = 0; c < in_channels; ++c)
        acc += in[n * in_channels + c] * weight[o * in_channels + c];
      out[n * out_channels + o] = acc;
    }
}

void matmul_backward(Vec* din, Vec& dweight, Vec* dbias, const Vec& dout, const Vec& in,
                     const Vec& weight, std::size_t rows, std::size_t in_channels,
                     std::size_t out_channels) {
  if (din) {
    din->assign(rows * in_channels, 0.0);
    for (std::size_t n = 0; n < rows; ++n)
      for (std::size_t c = 0; c < in_channels; ++c) {
        double acc = 0.0;
        for (std::size_t o = 0; o < out_channels; ++o)
          acc += dout[n * out_channels + o] * weight[o * in_channels + c];
        (*din)[n * in_channels + c] = acc;
      }
  }
  for (std::size_t o = 0; o < out_channels; ++o)
    for (std::size_t c = 0; c < in_channels; ++c) {
      double acc = 0.0;
      for (std::size_t n = 0; n < rows; ++n)
        acc += dout[n * out_channels + o] * in[n * in_channels + c];
      dweight[o * in_channels + c] += acc;
    }
  if (dbias)
    for (std::size_t o = 0; o < out_channels; ++o) {
      double acc = 0.0;
      for (std::size_t n = 0; n < rows; ++n) acc += dout[n * out_channels + o];
      (*dbias)[o] += acc;
    }
}

// ---------------------------------------------------------------- embeddings

void embedding_forward(Vec& out, const std::vector<int32_t>& tokens, const Vec& wte,
                       const Vec& wpe, std::size_t batch, std::size_t seq_len,
                       std::size_t channels) {
  out.assign(batch * seq_len * channels, 0.0);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < seq_len; ++t) {
      std::size_t row = b * seq_len + t;
      std::size_t tok = static_cast<std::size_t>(tokens[row]);
      for (std::size_t c = 0; c < channels; ++c)
        out[row * channels + c] = wte[tok * channels + c] + wpe[t * channels + c];
    }
}

void embedding_backward(Vec& dwte, Vec& dwpe, const Vec& dout, const std::vector<int32_t>& tokens,
                        std::size_t batch, std::size_t seq_len, std::size_t channels) {
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < seq_len; ++t) {
      std::size_t row = b * seq_len + t;
      std::size_t tok = static_cast<std::size_t>(tokens[row]);
      for (std::size_t c = 0; c < channels; ++c) {
        dwte[tok * channels + c] += dout[row * channels + c];
        dwpe[t * channels + c] += dout[row * channels + c];
      }
    }
}

// ---------------------------------------------------------------- attention

// Index helpers for qkv (B,T,3C): q at column h*hs+i, k at C + h*hs+i, v at 2C + h*hs+i.
void attention_forward(Vec& out, Vec& att, const Vec& qkv, std::size_t batch, std::size_t seq_len,
                       std::size_t channels, std::size_t num_heads) {
  const std::size_t B = batch, T = seq_len, C = channels, NH = num_heads, hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  out.assign(B * T * C, 0.0);
  att.assign(B * NH * T * T, 0.0);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < NH; ++h)
      for (std::size_t t = 0; t < T; ++t) {
        const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
        double* a = &att[((b * NH + h) * T + t) * T];
        // scores for t2 <= t, then a numerically stable softmax over them
        double maxs = -INFINITY;
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const double* k = &qkv[(b * T + t2) * 3 * C + C + h * hs];
          double s = 0.0;
          for (std::size_t i = 0; i < hs; ++i) s += q[i] * k[i];
          a[t2] = s * scale;
          maxs = std::max(maxs, a[t2]);
        }
        double denom = 0.0;
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          a[t2] = std::exp(a[t2] - maxs);
          denom += a[t2];
        }
        for (std::size_t t2 = 0; t2 <= t; ++t2) a[t2] /= denom;
        // a[t2] for t2 > t stays exactly 0
        double* o = &out[(b * T + t) * C + h * hs];
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const double* v = &qkv[(b * T + t2) * 3 * C + 2 * C + h * hs];
          for (std::size_t i = 0; i < hs; ++i) o[i] += a[t2] * v[i];
        }
      }
}

// Per (b, h, t), with s[t2] = scale q_t·k_t2, a = softmax(s) over t2 <= t, o_t = sum a[t2] v_t2:
//   da[t2]  = dout_t · v_t2
//   dv_t2  += a[t2] dout_t
//   ds[t2]  = a[t2] (da[t2] - sum_t3 a[t3] da[t3])          (softmax Jacobian)
//   dq_t   += scale sum_t2 ds[t2] k_t2
//   dk_t2  += scale ds[t2] q_t
void attention_backward(Vec& dqkv, const Vec& dout, const Vec& qkv, const Vec& att,
                        std::size_t batch, std::size_t seq_len, std::size_t channels,
                        std::size_t num_heads) {
  const std::size_t B = batch, T = seq_len, C = channels, NH = num_heads, hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  dqkv.assign(B * T * 3 * C, 0.0);
  Vec da(T), ds(T);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < NH; ++h)
      for (std::size_t t = 0; t < T; ++t) {
        const double* a = &att[((b * NH + h) * T + t) * T];
        const double* dy = &dout[(b * T + t) * C + h * hs];
        const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
        double* dq = &dqkv[(b * T + t) * 3 * C + h * hs];
        double dot = 0.0;
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const double* v = &qkv[(b * T + t2) * 3 * C + 2 * C + h * hs];
          double* dv = &dqkv[(b * T + t2) * 3 * C + 2 * C + h * hs];
          da[t2] = 0.0;
          for (std::size_t i = 0; i < hs; ++i) {
            da[t2] += dy[i] * v[i];
            dv[i] += a[t2] * dy[i];
          }
          dot += a[t2] * da[t2];
        }
        for (std::size_t t2 = 0; t2 <= t; ++t2) ds[t2] = a[t2] * (da[t2] - dot);
        for (std::size_t t2 = 0; t2 <= t; ++t2) {
          const double* k = &qkv[(b * T + t2) * 3 * C + C + h * hs];
          double* dk = &dqkv[(b * T + t2) * 3 * C + C + h * hs];
          for (std::size_t i = 0; i < hs; ++i) {
            dq[i] += scale * ds[t2] * k[i];
            dk[i] += scale * ds[t2] * q[i];
          }
        }
      }
}

// ---------------------------------------------------------------- cross-entropy

void crossentropy_forward_backward(Vec& losses, Vec& dlogits, const Vec& logits,
                                   const std::vector<int32_t>& targets, std::size_t rows,
                                   std::size_t vocab, double dloss_scale) {
  losses.assign(rows, 0.0);
  dlogits.assign(rows * vocab, 0.0);
  for (std::size_t n = 0; n < rows; ++n) {
    const double* x = &logits[n * vocab];
    double maxv = -INFINITY;
    for (std::size_t v = 0; v < vocab; ++v) maxv = std::max(maxv, x[v]);
    double denom = 0.0;
    for (std::size_t v = 0; v < vocab; ++v) denom += std::exp(x[v] - maxv);
    std::size_t target = static_cast<std::size_t>(targets[n]);
    // -log(exp(x_t - max) / denom)
    losses[n] = std::log(denom) - (x[target] - maxv);
    for (std::size_t v = 0; v < vocab; ++v) {
      double p = std::exp(x[v] - maxv) / denom;
      dlogits[n * vocab + v] = dloss_scale * (p - (v == target ? 1.0 : 0.0));
    }
  }
}

// ---------------------------------------------------------------- reductions

long double accurate_sum(const std::vector<float>& x) {
  long double s = 0.0L;
  for (float v : x) s += static_cast<long double>(v);
  return s;
}

long double accurate_sum_squares(const std::vector<float>& x) {
  long double s = 0.0L;
  for (float v : x) s += static_cast<long double>(v) * static_cast<long double>(v);
  return s;
}

double sum_abs(const std::vector<float>& x) {
  double s = 0.0;
  for (float v : x) s += std::fabs(double(v));
  return s;
}

// ---------------------------------------------------------------- AdamW

void adamw_update(Vec& param, const Vec& grad, Vec& exp_avg, Vec& exp_avg_sq,
                  const AdamWArgs& args) {
  const double lr = args.lr, b1 = args.beta1, b2 = args.beta2, eps = args.eps,
               wd = args.weight_decay, bc1 = args.bias_correction1, bc2 = args.bias_correction2;
  for (std::size_t i = 0; i < param.size(); ++i) {
    double g = grad[i];
    param[i] -= lr * wd * param[i];
    exp_avg[i] = b1 * exp_avg[i] + (1.0 - b1) * g;
    exp_avg_sq[i] = b2 * exp_avg_sq[i] + (1.0 - b2) * g * g;
    param[i] -= lr * (exp_avg[i] / bc1) / (std::sqrt(exp_avg_sq[i] / bc2) + eps);
  }
}

}  // namespace shardtrain::naive

// ================================================================ finite-difference self-checks
//
// Each check: a scalar loss L = sum(dout * forward(x)) in double; the naive backward's gradient
// is compared with the central difference (L(x+h) - L(x-h)) / 2h for every input element.
// Truncation error is O(h^2 * f''') ~ 1e-10 for h = 1e-5 on these O(1) smooth functions, and
// cancellation error ~ 1e-16 * |L| / h ~ 1e-10, so a tolerance of 1e-7 (relative in max norm)
// is far above both and far below any derivation mistake (which shows up as O(1e-2..1)).

namespace {

using shardtrain::naive::Vec;

double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

Vec finite_difference(const std::function<double(const Vec&)>& loss, const Vec& x0, double h) {
  Vec g(x0.size());
  Vec x = x0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = x0[i] + h;
    double lp = loss(x);
    x[i] = x0[i] - h;
    double lm = loss(x);
    x[i] = x0[i];
    g[i] = (lp - lm) / (2.0 * h);
  }
  return g;
}

double rel_err(const Vec& got, const Vec& want) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / std::max(scale, 1e-300);
}

Vec random_vec(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  return shardtrain::naive::to_double(shardtrain::test::random_floats(n, seed, lo, hi));
}

constexpr double kFdStep = 1e-5;
constexpr double kFdTol = 1e-7;

}  // namespace

namespace nv = shardtrain::naive;

TEST_CASE("naive gelu derivative matches finite differences", "[kernels][naive]") {
  for (double x = -6.0; x <= 6.0; x += 0.37) {
    double fd = (nv::gelu(x + kFdStep) - nv::gelu(x - kFdStep)) / (2.0 * kFdStep);
    INFO("x = " << x);
    CHECK(std::fabs(nv::gelu_derivative(x) - fd) <= kFdTol);
  }
  // Spot values of the tanh approximation itself (computed independently in Python).
  CHECK(nv::gelu(0.0) == 0.0);
  CHECK(std::fabs(nv::gelu(1.0) - 0.841191990608277) < 1e-12);
  CHECK(std::fabs(nv::gelu(-1.0) - (-0.158808009391723)) < 1e-12);
}

TEST_CASE("naive layernorm backward matches finite differences", "[kernels][naive]") {
  const std::size_t N = 3, C = 7;
  Vec in = random_vec(N * C, 11, -2.0f, 2.0f), w = random_vec(C, 12, 0.5f, 1.5f),
      b = random_vec(C, 13), dout = random_vec(N * C, 14);
  auto loss = [&](const Vec& x_in, const Vec& x_w, const Vec& x_b) {
    Vec out, mean, rstd;
    nv::layernorm_forward(out, mean, rstd, x_in, x_w, x_b, N, C);
    return dot(out, dout);
  };
  Vec out, mean, rstd;
  nv::layernorm_forward(out, mean, rstd, in, w, b, N, C);
  Vec din(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  nv::layernorm_backward(din, dw, db, dout, in, w, mean, rstd, N, C);

  CHECK(rel_err(din, finite_difference([&](const Vec& x) { return loss(x, w, b); }, in,
                                       kFdStep)) <= kFdTol);
  CHECK(rel_err(dw, finite_difference([&](const Vec& x) { return loss(in, x, b); }, w,
                                      kFdStep)) <= kFdTol);
  CHECK(rel_err(db, finite_difference([&](const Vec& x) { return loss(in, w, x); }, b,
                                      kFdStep)) <= kFdTol);
}

TEST_CASE("naive matmul backward matches finite differences", "[kernels][naive]") {
  const std::size_t N = 4, C = 5, OC = 3;
  Vec in = random_vec(N * C, 21), w = random_vec(OC * C, 22), bias = random_vec(OC, 23),
      dout = random_vec(N * OC, 24);
  auto loss = [&](const Vec& x_in, const Vec& x_w, const Vec& x_b) {
    Vec out;
    nv::matmul_forward(out, x_in, x_w, &x_b, N, C, OC);
    return dot(out, dout);
  };
  Vec din, dw(OC * C, 0.0), db(OC, 0.0);
  nv::matmul_backward(&din, dw, &db, dout, in, w, N, C, OC);
  CHECK(rel_err(din, finite_difference([&](const Vec& x) { return loss(x, w, bias); }, in,
                                       kFdStep)) <= kFdTol);
  CHECK(rel_err(dw, finite_difference([&](const Vec& x) { return loss(in, x, bias); }, w,
                                      kFdStep)) <= kFdTol);
  CHECK(rel_err(db, finite_difference([&](const Vec& x) { return loss(in, w, x); }, bias,
                                      kFdStep)) <= kFdTol);
}

TEST_CASE("naive attention backward matches finite differences", "[kernels][naive]") {
  // B=2, T=5, C=6, NH=2 (hs=3): small enough for 2*B*T*3C = 360 forward evaluations.
  const std::size_t B = 2, T = 5, C = 6, NH = 2;
  Vec qkv = random_vec(B * T * 3 * C, 31, -2.0f, 2.0f), dout = random_vec(B * T * C, 32);
  auto loss = [&](const Vec& x) {
    Vec out, att;
    nv::attention_forward(out, att, x, B, T, C, NH);
    return dot(out, dout);
  };
  Vec out, att;
  nv::attention_forward(out, att, qkv, B, T, C, NH);
  // The forward itself: rows of att sum to 1 over t2 <= t and are 0 above the diagonal.
  for (std::size_t r = 0; r < B * NH * T; ++r) {
    std::size_t t = r % T;
    double s = 0.0;
    for (std::size_t t2 = 0; t2 < T; ++t2) {
      if (t2 > t) CHECK(att[r * T + t2] == 0.0);
      s += att[r * T + t2];
    }
    CHECK(std::fabs(s - 1.0) < 1e-14);
  }
  Vec dqkv;
  nv::attention_backward(dqkv, dout, qkv, att, B, T, C, NH);
  CHECK(rel_err(dqkv, finite_difference(loss, qkv, kFdStep)) <= kFdTol);
}

TEST_CASE("naive cross-entropy gradient matches finite differences", "[kernels][naive]") {
  const std::size_t N = 3, V = 11;
  const double scale = 1.0 / 3.0;
  Vec logits = random_vec(N * V, 41, -3.0f, 3.0f);
  std::vector<int32_t> targets = {4, 0, 10};
  auto loss = [&](const Vec& x) {
    Vec losses, dl;
    nv::crossentropy_forward_backward(losses, dl, x, targets, N, V, scale);
    double s = 0.0;
    for (double l : losses) s += scale * l;
    return s;
  };
  Vec losses, dlogits;
  nv::crossentropy_forward_backward(losses, dlogits, logits, targets, N, V, scale);
  CHECK(rel_err(dlogits, finite_difference(loss, logits, kFdStep)) <= kFdTol);
  // Loss against the textbook formula log(sum exp) - x_target (no max shift).
  for (std::size_t n = 0; n < N; ++n) {
    double s = 0.0;
    for (std::size_t v = 0; v < V; ++v) s += std::exp(logits[n * V + v]);
    CHECK(std::fabs(losses[n] - (std::log(s) - logits[n * V + targets[n]])) < 1e-13);
  }
}

TEST_CASE("naive AdamW matches a hand-computed first step", "[kernels][naive]") {
  // t = 1, g = 0.5, p = 1: m = 0.1*0.5 = 0.05, v = 0.05*0.25 = 0.0125,
  // mhat = 0.05/0.1 = 0.5, vhat = 0.0125/0.05 = 0.25, p = 1 - 0.1*0.01*1 = 0.999,
  // p -= 0.1 * 0.5 / (0.5 + 0.25) = 0.0666..., so p = 0.932333...
  shardtrain::AdamWArgs a;
  a.lr = 0.1f;
  a.beta1 = 0.9f;
  a.beta2 = 0.95f;
  a.eps = 0.25f;
  a.weight_decay = 0.01f;
  a.bias_correction1 = 1.0f - 0.9f;
  a.bias_correction2 = 1.0f - 0.95f;
  Vec p = {1.0}, g = {0.5}, m = {0.0}, v = {0.0};
  nv::adamw_update(p, g, m, v, a);
  // The float hyper-parameters are not exact decimals: 1 - 0.9f = 0.100000024 (2.4e-7 relative),
  // so m = 0.050000012; allow 1e-7.
  CHECK(std::fabs(m[0] - 0.05) < 1e-7);
  CHECK(std::fabs(v[0] - 0.0125) < 1e-7);
  CHECK(std::fabs(p[0] - (0.999 - 0.1 * 0.5 / 0.75)) < 1e-6);
}
