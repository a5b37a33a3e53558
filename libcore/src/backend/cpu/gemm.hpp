// The matrix-product interface behind the CPU backend's ops (private to cpu/): one implementation
// per GEMM library (dnnl_gemm.hpp, and OpenBLAS and BLIS in gemm_libraries.cpp).
//
//   for b in [0, batch):  C_b = alpha * A_b @ B_b (+ bias) (+ C_b when accumulate)
//
// A_b is (M,K), B_b is (K,N), C_b is (M,N), fp32; each operand is described by (batch stride, row
// stride, column stride) in elements, so a transposed operand is just swapped strides. C's column
// stride is 1. bias: N floats added to every row (may be null). Every implementation runs on the
// thread count it was made with and is deterministic for a fixed thread count and shapes.
#pragma once
#include <cstdint>
#include <memory>

namespace shardtrain::cpu {

struct Strides {
  int64_t batch = 0;
  int64_t row = 0;
  int64_t col = 1;
};

class Gemm {
 public:
  virtual ~Gemm() = default;
  virtual void run(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, Strides a, const float* B,
                   Strides b, float* C, Strides c, float alpha, const float* bias, bool accumulate) = 0;
};

// The OpenBLAS and BLIS implementations (gemm_libraries.cpp); UsageError when the build lacks them.
std::unique_ptr<Gemm> make_openblas_gemm(int threads);
std::unique_ptr<Gemm> make_blis_gemm(int threads);

}  // namespace shardtrain::cpu
