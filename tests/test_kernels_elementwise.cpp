// The CPU backend's memory, elementwise and layernorm ops against the naive references
// (kernel_test_support.hpp says how).
#include <catch2/catch.hpp>

#include "kernel_test_support.hpp"

using namespace kernel_test;

// ============================================================================== memory

TEST_CASE("kernels: memory ops (allocate zeroed and aligned, upload/download, fill, copy)",
          "[kernels]") {
  for (int threads : kThreadCounts) {
    INFO(threads << " thread(s)");
    auto backend = make_cpu_backend(threads);
    Backend& be = *backend;
    const std::size_t n = 1003;
    DeviceArray<float> a(be, n);
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0);
    std::vector<float> host = to_host(a);
    CHECK(std::all_of(host.begin(), host.end(), [](float v) { return v == 0.0f; }));

    std::vector<float> x = random_floats(n, 1);
    a.upload(x.data(), n);
    be.fill(a.data() + 3, n - 10, 2.5f);  // elements [3, n-7)
    host = to_host(a);
    for (std::size_t i = 0; i < n; ++i) {
      float want = (i >= 3 && i < n - 7) ? 2.5f : x[i];
      if (host[i] != want) FAIL_CHECK("fill: element " << i << " is " << host[i]);
    }

    DeviceArray<float> b = to_device(be, random_floats(n, 2));
    be.copy_bytes(b.data() + 5, a.data() + 1, 17 * sizeof(float));
    std::vector<float> bh = to_host(b), want_b = random_floats(n, 2);
    for (std::size_t i = 0; i < 17; ++i) want_b[5 + i] = host[1 + i];
    CHECK(bitwise_equal(bh, want_b));

    std::vector<float> part(11);
    b.download(part.data(), 11, 5);
    CHECK(std::equal(part.begin(), part.end(), want_b.begin() + 5));
    be.synchronize();
  }
}

TEST_CASE("kernels: large blocks are zeroed whether fresh or reused, huge-page aligned, and reused by size",
          "[kernels]") {
  // Blocks of 2 MiB or more come from the kernel untouched and are kept on release for the next
  // request of the same size (host_memory.hpp): a reused block must come back zeroed like a fresh one.
  auto backend = make_cpu_backend(1);
  Backend& be = *backend;
  const std::size_t n = (std::size_t(3) << 20) / sizeof(float) + 5;  // 3 MiB and a bit: rounded to 4 MiB
  const auto all_zero = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
  };
  float* first = nullptr;
  {
    DeviceArray<float> a(be, n);
    first = a.data();
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % (std::uintptr_t(2) << 20) == 0);
    CHECK(all_zero(to_host(a)));
    be.fill(a.data(), n, 7.0f);  // dirty it before it goes back
  }
  {
    DeviceArray<float> again(be, n - 3);  // the same rounded size: the block just released
    CHECK(again.data() == first);
    CHECK(all_zero(to_host(again)));
    DeviceArray<float> other(be, 2 * n);  // another size: a fresh block, zeroed too
    CHECK(other.data() != first);
    CHECK(all_zero(to_host(other)));
  }
  // Small blocks (the C allocator's) are zeroed too, after a dirty one was freed.
  {
    DeviceArray<float> s(be, 1000);
    be.fill(s.data(), 1000, 3.0f);
  }
  DeviceArray<float> s2(be, 1000);
  CHECK(all_zero(to_host(s2)));
}

// ============================================================================== elementwise

TEST_CASE("kernels: add", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t n = 4 * s.B * s.T * s.C + 7;
    auto a = random_floats(n, 101), b = random_floats(n, 102, -3.0f, 0.5f);
    check_op(std::string("add n=") + std::to_string(n),
             [&](Backend& be, int variant) {
               auto da = to_device(be, a), db = to_device(be, b);
               auto out = to_device(be, garbage(n, variant));
               be.add(out.data(), da.data(), db.data(), n);
               return Outputs{to_host(out)};
             },
             {{"out", add_vec(to_double(a), to_double(b)), kExact}});
  }
}

TEST_CASE("kernels: accumulate (+=)", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t n = 4 * s.B * s.T * s.C + 7;
    auto y0 = random_floats(n, 111, -2.0f, 2.0f), x = random_floats(n, 112);
    check_op(std::string("accumulate n=") + std::to_string(n),
             [&](Backend& be, int) {
               auto dy = to_device(be, y0), dx = to_device(be, x);
               be.accumulate(dy.data(), dx.data(), n);
               return Outputs{to_host(dy)};
             },
             {{"y", add_vec(to_double(y0), to_double(x)), kExact}});
  }
}

TEST_CASE("kernels: scale", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t n = 4 * s.B * s.T * s.C + 7;
    auto x = random_floats(n, 121, -5.0f, 5.0f);
    const float factor = 0.37f;
    Vec want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = double(x[i]) * double(factor);
    check_op(std::string("scale n=") + std::to_string(n),
             [&](Backend& be, int) {
               auto dx = to_device(be, x);
               be.scale(dx.data(), n, factor);
               return Outputs{to_host(dx)};
             },
             {{"x", want, kExact}});
  }
}

TEST_CASE("kernels: gelu forward and backward", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t n = 4 * s.B * s.T * s.C + 7;
    // |x| <= 4: covers both tails of the tanh approximation and its steep middle part.
    auto in = random_floats(n, 131, -4.0f, 4.0f), dout = random_floats(n, 132);
    Vec out_ref, din_ref;
    nv::gelu_forward(out_ref, to_double(in));
    nv::gelu_backward(din_ref, to_double(in), to_double(dout));
    check_op(std::string("gelu_forward n=") + std::to_string(n),
             [&](Backend& be, int variant) {
               auto d_in = to_device(be, in);
               auto out = to_device(be, garbage(n, variant));
               be.gelu_forward(out.data(), d_in.data(), n);
               return Outputs{to_host(out)};
             },
             {{"out", out_ref, kElementwise}});
    check_op(std::string("gelu_backward n=") + std::to_string(n),
             [&](Backend& be, int variant) {
               auto d_in = to_device(be, in), d_dout = to_device(be, dout);
               auto din = to_device(be, garbage(n, variant));  // overwritten, not accumulated
               be.gelu_backward(din.data(), d_in.data(), d_dout.data(), n);
               return Outputs{to_host(din)};
             },
             {{"din", din_ref, kGeluBackward}});
  }
}

TEST_CASE("kernels: gelu of NaN is NaN, forward and backward (the trainer's non-finite check needs it)", "[kernels]") {
  // fast_exp used to cast a NaN to int32 (undefined behaviour; UBSan stopped ddp_faults' NaN run
  // in the sanitizer build): NaN must come out as NaN, through defined arithmetic.
  auto backend = make_cpu_backend(1);
  Backend& be = *backend;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {nan, 0.5f, -nan, 1e30f, -1e30f};
  const std::vector<float> dout = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  auto d_in = to_device(be, in), d_dout = to_device(be, dout);
  auto out = to_device(be, std::vector<float>(in.size(), 0.0f));
  auto din = to_device(be, std::vector<float>(in.size(), 0.0f));
  be.gelu_forward(out.data(), d_in.data(), in.size());
  be.gelu_backward(din.data(), d_in.data(), d_dout.data(), in.size());
  const auto y = to_host(out), dy = to_host(din);
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(y[2]));
  CHECK(std::isnan(dy[0]));
  CHECK(std::isnan(dy[2]));
  CHECK(y[1] == Approx(0.3457f).margin(1e-3));  // the finite ones untouched
  CHECK(y[3] == 1e30f);
  CHECK(y[4] == 0.0f);
}

// ============================================================================== layer norm

TEST_CASE("kernels: layernorm forward", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t N = s.B * s.T, C = s.C;
    // Inputs with a non-zero mean (0.5) so the mean output is not all cancellation.
    auto in = random_floats(N * C, 141, -1.5f, 2.5f);
    auto w = random_floats(C, 142, 0.5f, 1.5f), b = random_floats(C, 143, -0.5f, 0.5f);
    Vec out, mean, rstd;
    nv::layernorm_forward(out, mean, rstd, to_double(in), to_double(w), to_double(b), N, C);
    check_op(std::string("layernorm_forward ") + s.name,
             [&](Backend& be, int variant) {
               auto d_in = to_device(be, in), dw = to_device(be, w), db = to_device(be, b);
               auto d_out = to_device(be, garbage(N * C, variant));
               auto d_mean = to_device(be, garbage(N, variant));
               auto d_rstd = to_device(be, garbage(N, variant));
               be.layernorm_forward(d_out.data(), d_mean.data(), d_rstd.data(), d_in.data(),
                                    dw.data(), db.data(), N, C);
               return Outputs{to_host(d_out), to_host(d_mean), to_host(d_rstd)};
             },
             {{"out", out, kReduction}, {"mean", mean, kReduction}, {"rstd", rstd, kReduction}});
  }
}

TEST_CASE("kernels: layernorm backward (+= into din, dweight, dbias)", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t N = s.B * s.T, C = s.C;
    auto in = random_floats(N * C, 151, -1.5f, 2.5f);
    auto w = random_floats(C, 152, 0.5f, 1.5f), b = random_floats(C, 153, -0.5f, 0.5f);
    auto dout = random_floats(N * C, 154);
    // mean and rstd as the forward would hand them over (fp32); both sides consume these.
    Vec out_d, mean_d, rstd_d;
    nv::layernorm_forward(out_d, mean_d, rstd_d, to_double(in), to_double(w), to_double(b), N, C);
    auto mean = to_float(mean_d), rstd = to_float(rstd_d);
    auto din0 = random_floats(N * C, 155), dw0 = random_floats(C, 156),
         db0 = random_floats(C, 157);
    Vec din = to_double(din0), dw = to_double(dw0), db = to_double(db0);
    nv::layernorm_backward(din, dw, db, to_double(dout), to_double(in), to_double(w),
                           to_double(mean), to_double(rstd), N, C);
    check_op(std::string("layernorm_backward ") + s.name,
             [&](Backend& be, int) {
               auto d_in = to_device(be, in), d_w = to_device(be, w),
                    d_dout = to_device(be, dout), d_mean = to_device(be, mean),
                    d_rstd = to_device(be, rstd);
               auto d_din = to_device(be, din0), d_dw = to_device(be, dw0),
                    d_db = to_device(be, db0);
               be.layernorm_backward(d_din.data(), d_dw.data(), d_db.data(), d_dout.data(),
                                     d_in.data(), d_w.data(), d_mean.data(), d_rstd.data(), N, C);
               return Outputs{to_host(d_din), to_host(d_dw), to_host(d_db)};
             },
             {{"din", din, kReduction}, {"dweight", dw, kReduction}, {"dbias", db, kReduction}});
  }
}

// ============================================================================== matmul
