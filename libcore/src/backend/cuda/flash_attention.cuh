// Fused causal self-attention for the CUDA backend (flash-attention style): the (T,T) score and
// probability matrices are never written to global memory. Forward keeps, per (b, h, query row),
// the softmax's log-sum-exp; backward recomputes the probabilities tile by tile from it.
//
// Layout (backend.hpp attention_forward): qkv (B,T,3C), q|k|v thirds, head h at columns
// [h*hs, (h+1)*hs) of each third; out (B,T,C). The state buffer ("att" in backend.hpp) holds
// flash_attention_state_elements(B,NH,T) = B*NH*T floats: lse (B,NH,T), written by forward, read
// by backward. Backward also needs delta (B,NH,T), delta_i = sum_j p_ij (dout_i . v_j), in a
// scratch buffer of the caller's (flash_attention_delta_elements).
//
// Algorithm (fp32 throughout: scores, softmax statistics and products accumulate in fp32):
//  forward, one thread per query row i, key tiles of kKeyTile rows staged in shared memory:
//    per tile, s_j = scale * q_i . k_j (j <= i), m' = max(m, max_j s_j), l = l e^(m-m') + sum_j
//    e^(s_j - m'), acc = acc e^(m-m') + sum_j e^(s_j - m') v_j; at the end out_i = acc / l,
//    lse_i = m + log l.
//  backward, without atomics:
//    kernel 1, one thread per query row i: delta_i = sum_j p_ij dp_ij with p_ij = e^(s_ij - lse_i),
//      dp_ij = dout_i . v_j; then dq_i = scale sum_j p_ij (dp_ij - delta_i) k_j;
//    kernel 2, one thread per key row j: dv_j = sum_{i>=j} p_ij dout_i, dk_j = scale sum_{i>=j}
//      p_ij (dp_ij - delta_i) q_i.
//  Every thread adds in a fixed order (tile by tile, row by row): bitwise reproducible.
// Head sizes up to 128 (a thread keeps its rows in registers: three template sizes 32/64/128).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace shardtrain::cuda_impl {

constexpr std::size_t kFlashMaxHeadSize = 128;

inline std::size_t flash_attention_state_elements(std::size_t batch, std::size_t num_heads,
                                                  std::size_t seq_len) {
  return batch * num_heads * seq_len;
}
inline std::size_t flash_attention_delta_elements(std::size_t batch, std::size_t num_heads,
                                                  std::size_t seq_len) {
  return batch * num_heads * seq_len;
}

// Shapes are checked by the caller: hs = C / NH in 1..kFlashMaxHeadSize, all sizes > 0.
void launch_flash_attention_forward(float* out, float* state, const float* qkv, std::size_t batch,
                                    std::size_t seq_len, std::size_t channels,
                                    std::size_t num_heads, cudaStream_t stream);
// dqkv overwritten (every element of every row); delta (flash_attention_delta_elements) is scratch.
void launch_flash_attention_backward(float* dqkv, const float* lse, float* delta, const float* dout,
                                     const float* qkv, std::size_t batch, std::size_t seq_len,
                                     std::size_t channels, std::size_t num_heads,
                                     cudaStream_t stream);

}  // namespace shardtrain::cuda_impl
