#include "dnnl_gemm.hpp"

#include <omp.h>

#include "shardtrain/base/error.hpp"

namespace shardtrain::cpu {

using dt = dnnl::memory::data_type;

DnnlGemm::DnnlGemm(int threads) : threads_(threads), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

DnnlGemm::Entry& DnnlGemm::lookup(const Key& key, int64_t batch, int64_t M, int64_t N, int64_t K,
                                  Strides a, Strides b, Strides c, float alpha, bool has_bias,
                                  bool accumulate) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Entry e;
  e.a = dnnl::memory::desc({batch, M, K}, dt::f32, {a.batch, a.row, a.col});
  e.b = dnnl::memory::desc({batch, K, N}, dt::f32, {b.batch, b.row, b.col});
  e.c = dnnl::memory::desc({batch, M, N}, dt::f32, {c.batch, c.row, c.col});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    if (has_bias) {
      e.bias = dnnl::memory::desc({1, 1, N}, dt::f32, {N, N, 1});
      dnnl::matmul::desc d(e.a, e.b, e.bias, e.c);
      e.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine_));
    } else {
      dnnl::matmul::desc d(e.a, e.b, e.c);
      e.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine_));
    }
  } catch (const dnnl::error& err) {
    throw Error(ExitCode::kInternal, std::string("oneDNN matmul creation failed (") + err.what() +
                                         ") for batch " + std::to_string(batch) + ", M " +
                                         std::to_string(M) + ", N " + std::to_string(N) + ", K " +
                                         std::to_string(K));
  }
  return cache_.emplace(key, std::move(e)).first->second;
}

void DnnlGemm::run(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, Strides a,
                   const float* B, Strides b, float* C, Strides c, float alpha, const float* bias,
                   bool accumulate) {
  omp_set_num_threads(threads_);
  // A batch of one needs no batch stride; normalising it keeps the cache small.
  if (batch == 1) a.batch = b.batch = c.batch = 0;
  Key key{batch, M, N, K, a.batch, a.row, a.col, b.batch, b.row, b.col, c.batch, c.row, c.col,
          alpha, bias != nullptr, accumulate};
  if (batch == 1) {
    a.batch = M * K;
    b.batch = K * N;
    c.batch = M * N;
  }
  Entry& e = lookup(key, batch, M, N, K, a, b, c, alpha, bias != nullptr, accumulate);
  dnnl::memory am(e.a, engine_, const_cast<float*>(A));
  dnnl::memory bm(e.b, engine_, const_cast<float*>(B));
  dnnl::memory cm(e.c, engine_, C);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, engine_, const_cast<float*>(bias)));
  e.primitive.execute(stream_, args);
  stream_.wait();
}

}  // namespace shardtrain::cpu
