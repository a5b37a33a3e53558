// Strided, batched fp32 matrix products through oneDNN's matmul primitive (CPU backend only;
// the product's contract is gemm.hpp's). oneDNN primitives are expensive to create, so they are
// cached per distinct shape/stride/flag key. oneDNN runs with the OpenMP thread count of the
// calling thread (set by the backend).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "gemm.hpp"

#include <oneapi/dnnl/dnnl.hpp>

namespace shardtrain::cpu {

class DnnlGemm final : public Gemm {
 public:
  // threads: the OpenMP thread count oneDNN runs with (set before every product).
  explicit DnnlGemm(int threads);
  // bias: N floats added to every row (may be null). accumulate: C += result.
  void run(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, Strides a,
           const float* B, Strides b, float* C, Strides c, float alpha, const float* bias,
           bool accumulate) override;

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, int64_t, int64_t, float, bool, bool>;
  struct Entry {
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c, bias;
  };
  Entry& lookup(const Key& key, int64_t batch, int64_t M, int64_t N, int64_t K, Strides a,
                Strides b, Strides c, float alpha, bool has_bias, bool accumulate);

  int threads_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<Key, Entry> cache_;
};

}  // namespace shardtrain::cpu
