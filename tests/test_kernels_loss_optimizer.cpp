// The CPU backend's cross-entropy, reductions and AdamW against the naive references
// (kernel_test_support.hpp says how).
#include <catch2/catch.hpp>

#include "kernel_test_support.hpp"

using namespace kernel_test;

TEST_CASE("kernels: crossentropy forward+backward", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t N = s.B * s.T, V = s.V;
    auto logits = random_floats(N * V, 601, -4.0f, 4.0f);
    auto targets = tokens_with_repeats(N, V, 602);
    // Not a power of two, as the mean over B*T rows is in training.
    const float dloss_scale = 1.0f / float(N);
    Vec losses, dlogits;
    nv::crossentropy_forward_backward(losses, dlogits, to_double(logits), targets, N, V,
                                      double(dloss_scale));
    check_op(std::string("crossentropy_forward_backward ") + s.name,
             [&](Backend& be, int variant) {
               auto d_logits = to_device(be, logits);
               auto d_targets = to_device(be, targets);
               auto d_losses = to_device(be, garbage(N, variant));
               be.crossentropy_forward_backward(d_losses.data(), d_logits.data(),
                                                d_targets.data(), N, V, dloss_scale);
               return Outputs{to_host(d_losses), to_host(d_logits)};
             },
             {{"losses", losses, kReduction}, {"dlogits", dlogits, kReduction}});
  }
}

// ============================================================================== reductions

TEST_CASE("kernels: sum and sum_squares (double, chunked, thread-count independent)",
          "[kernels]") {
  constexpr std::size_t kChunk = Backend::kReductionChunk;
  const std::size_t sizes[] = {0, 1, 1000, kChunk, 2 * kChunk, 3 * kChunk + 123,
                               10 * kChunk + 777};
  auto b1 = make_cpu_backend(1), b2 = make_cpu_backend(2);
  for (std::size_t n : sizes) {
    // Values with a non-zero mean and a wide dynamic range (every 7th scaled by 1e-6), so that
    // the double partial sums are inexact and the summation order shows in the last bits.
    auto x = random_floats(n, 700 + unsigned(n), -1.0f, 3.0f);
    for (std::size_t i = 0; i < n; i += 7) x[i] *= 1e-6f;
    const long double exact_sum = nv::accurate_sum(x), exact_sq = nv::accurate_sum_squares(x);
    const double abs_sum = nv::sum_abs(x);
    double abs_sq = 0.0;
    for (float v : x) abs_sq += double(v) * double(v);
    // Any order of double additions of n terms: |error| <= (n-1) 2^-53 sum|terms| (+ slack).
    const double bound_sum = (double(n) + 1.0) * 0x1.0p-53 * abs_sum + 1e-300;
    const double bound_sq = (double(n) + 1.0) * 0x1.0p-53 * abs_sq + 1e-300;

    double by_threads_sum[2], by_threads_sq[2];
    int idx = 0;
    for (Backend* be : {b1.get(), b2.get()}) {
      const int threads = idx + 1;
      INFO("n = " << n << ", " << threads << " thread(s)");
      auto d = to_device(*be, x);
      double s = be->sum(d.data(), n), s_again = be->sum(d.data(), n);
      double q = be->sum_squares(d.data(), n), q_again = be->sum_squares(d.data(), n);
      CHECK(std::memcmp(&s, &s_again, sizeof s) == 0);
      CHECK(std::memcmp(&q, &q_again, sizeof q) == 0);
      // Accuracy: accumulated in double (fp32 accumulation would be ~1e-7 relative, 1e5x off).
      INFO("sum " << s << " vs exact " << double(exact_sum) << ", sum_squares " << q
                  << " vs exact " << double(exact_sq));
      CHECK(std::fabs(double(s - exact_sum)) <= bound_sum);
      CHECK(std::fabs(double(q - exact_sq)) <= bound_sq);
      // (Not checked: the order of additions inside a chunk. The header's promises are the
      // fixed chunking, thread-count independence and the chunk-boundary split below.)
      // Splitting at chunk boundaries: the per-chunk results, added in order, give the whole.
      double s_pieces = 0.0, q_pieces = 0.0;
      for (std::size_t start = 0; start < n; start += kChunk) {
        std::size_t len = std::min(kChunk, n - start);
        s_pieces += be->sum(d.data() + start, len);
        q_pieces += be->sum_squares(d.data() + start, len);
      }
      CHECK(std::memcmp(&s, &s_pieces, sizeof s) == 0);
      CHECK(std::memcmp(&q, &q_pieces, sizeof q) == 0);
      by_threads_sum[idx] = s;
      by_threads_sq[idx] = q;
      if (report_enabled())
        std::printf("[kernels] sum/sum_squares n=%-6zu threads=%d  sum err=%.3e (bound %.1e)  "
                    "sum_squares err=%.3e (bound %.1e)\n",
                    n, threads, std::fabs(double(s - exact_sum)), bound_sum,
                    std::fabs(double(q - exact_sq)), bound_sq);
      ++idx;
    }
    INFO("n = " << n << ": 1 thread vs 2 threads");
    CHECK(std::memcmp(&by_threads_sum[0], &by_threads_sum[1], sizeof(double)) == 0);
    CHECK(std::memcmp(&by_threads_sq[0], &by_threads_sq[1], sizeof(double)) == 0);
  }
}

// ============================================================================== AdamW

TEST_CASE("kernels: adamw_update over several steps with bias corrections", "[kernels]") {
  const std::size_t n = 3 * Backend::kReductionChunk + 501;  // big enough to be split by threads
  const int steps = 4;
  AdamWArgs base;
  base.lr = 0.05f;
  base.beta1 = 0.9f;
  base.beta2 = 0.95f;
  base.eps = 1e-3f;  // large enough to matter for the small gradients below
  base.weight_decay = 0.1f;
  for (int threads : kThreadCounts) {
    auto backend = make_cpu_backend(threads);
    Backend& be = *backend;
    std::vector<float> p = random_floats(n, 800), m(n, 0.0f), v(n, 0.0f);
    for (int t = 1; t <= steps; ++t) {
      AdamWArgs args = base;
      args.bias_correction1 = 1.0f - std::pow(args.beta1, float(t));
      args.bias_correction2 = 1.0f - std::pow(args.beta2, float(t));
      auto g = random_floats(n, 810 + unsigned(t));
      for (std::size_t i = 0; i < n; i += 5) g[i] *= 1e-3f;  // small gradients: eps matters
      for (std::size_t i = 3; i < n; i += 11) g[i] = 0.0f;
      // Reference step from exactly the state the backend starts this step from.
      Vec p_ref = to_double(p), m_ref = to_double(m), v_ref = to_double(v);
      nv::adamw_update(p_ref, to_double(g), m_ref, v_ref, args);
      Vec delta_ref(n);
      for (std::size_t i = 0; i < n; ++i) delta_ref[i] = p_ref[i] - double(p[i]);

      auto run = [&] {
        auto dp = to_device(be, p), dg = to_device(be, g), dm = to_device(be, m),
             dv = to_device(be, v);
        be.adamw_update(dp.data(), dg.data(), dm.data(), dv.data(), n, args);
        return Outputs{to_host(dp), to_host(dm), to_host(dv)};
      };
      Outputs r1 = run(), r2 = run();
      Vec delta_got_d(n);
      for (std::size_t i = 0; i < n; ++i) delta_got_d[i] = double(r1[0][i]) - double(p[i]);
      const double e_p = rel_error(r1[0], p_ref), e_m = rel_error(r1[1], m_ref),
                   e_v = rel_error(r1[2], v_ref);
      // |delta| error: compare doubles directly (the float difference is exact in double).
      double dd = 0.0, ds = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        dd = std::max(dd, std::fabs(delta_got_d[i] - delta_ref[i]));
        ds = std::max(ds, std::fabs(delta_ref[i]));
      }
      const double e_delta = dd / ds;
      INFO("adamw step " << t << ", " << threads << " thread(s): err param " << e_p << ", m "
                         << e_m << ", v " << e_v << ", update " << e_delta);
      CHECK(bitwise_equal(r1[0], r2[0]));
      CHECK(bitwise_equal(r1[1], r2[1]));
      CHECK(bitwise_equal(r1[2], r2[2]));
      CHECK(e_p <= kAdamW);
      CHECK(e_m <= kAdamW);
      CHECK(e_v <= kAdamW);
      CHECK(e_delta <= kAdamWDelta);
      if (report_enabled())
        std::printf("[kernels] adamw step %d threads=%d  err param=%.3e m=%.3e v=%.3e "
                    "update=%.3e\n",
                    t, threads, e_p, e_m, e_v, e_delta);
      p = r1[0];
      m = r1[1];
      v = r1[2];
    }
  }
}
