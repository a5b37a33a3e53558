// Fused causal attention kernels; the contract and the algorithm are in flash_attention.cuh.
#include <cmath>

#include "cuda_common.cuh"
#include "flash_attention.cuh"

namespace shardtrain::cuda_impl {
namespace {

constexpr int kRowsPerBlock = 64;  // query (forward, dq) or key (dk, dv) rows per block, one per thread
constexpr int kKeyTile = 32;       // rows of the other operand staged in shared memory per step

struct Shape {
  int T, C, NH, hs;
  float scale;
  // Row pointers of head h of sequence b.
  __device__ const float* q(const float* qkv, int b, int h, int t) const {
    return qkv + (std::size_t(b) * T + t) * 3 * C + std::size_t(h) * hs;
  }
  __device__ const float* k(const float* qkv, int b, int h, int t) const { return q(qkv, b, h, t) + C; }
  __device__ const float* v(const float* qkv, int b, int h, int t) const { return q(qkv, b, h, t) + 2 * C; }
  __device__ std::size_t out_index(int b, int h, int t) const {
    return (std::size_t(b) * T + t) * C + std::size_t(h) * hs;
  }
  __device__ std::size_t row_stat(int b, int h, int t) const {
    return (std::size_t(b) * NH + h) * T + t;
  }
};

// Stages rows [first, first + kKeyTile) (those < T) of one or two operands into shared memory,
// HS floats per row, zeros for rows past T. All threads of the block take part.
template <int HS>
__device__ void stage_rows(float (*dst_a)[HS], float (*dst_b)[HS], const float* base_a,
                           const float* base_b, std::size_t row_stride, int first, int T, int hs) {
  for (int e = threadIdx.x; e < kKeyTile * HS; e += blockDim.x) {
    const int r = e / HS, d = e % HS, t = first + r;
    const bool valid = t < T && d < hs;
    dst_a[r][d] = valid ? base_a[std::size_t(t) * row_stride + d] : 0.0f;
    if (dst_b) dst_b[r][d] = valid ? base_b[std::size_t(t) * row_stride + d] : 0.0f;
  }
}

template <int HS>
__device__ float dot(const float* a, const float (&b)[HS]) {
  float s = 0.0f;
#pragma unroll
  for (int d = 0; d < HS; ++d) s += a[d] * b[d];  // padding columns are zero on both sides
  return s;
}

template <int HS>
__global__ void flash_forward_kernel(float* out, float* lse, const float* qkv, Shape s) {
  __shared__ float k_tile[kKeyTile][HS];
  __shared__ float v_tile[kKeyTile][HS];
  const int bh = blockIdx.y, b = bh / s.NH, h = bh % s.NH;
  const int i = blockIdx.x * kRowsPerBlock + threadIdx.x;
  const bool active = i < s.T;
  float q[HS], acc[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    q[d] = active && d < s.hs ? s.q(qkv, b, h, i)[d] : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int last_row = min(s.T - 1, int(blockIdx.x) * kRowsPerBlock + kRowsPerBlock - 1);
  const std::size_t stride = std::size_t(3) * s.C;
  for (int first = 0; first <= last_row; first += kKeyTile) {
    __syncthreads();
    stage_rows<HS>(k_tile, v_tile, s.k(qkv, b, h, 0), s.v(qkv, b, h, 0), stride, first, s.T, s.hs);
    __syncthreads();
    if (!active || first > i) continue;
    const int n = min(kKeyTile, i - first + 1);  // causal: keys first..i
    float scores[kKeyTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeyTile; ++j) {
      scores[j] = j < n ? s.scale * dot<HS>(k_tile[j], q) : -INFINITY;
      tile_max = fmaxf(tile_max, scores[j]);
    }
    const float m_new = fmaxf(m, tile_max);
    const float correction = expf(m - m_new);  // 0 on the first tile (m = -inf)
    l *= correction;
#pragma unroll
    for (int d = 0; d < HS; ++d) acc[d] *= correction;
#pragma unroll
    for (int j = 0; j < kKeyTile; ++j) {
      if (j >= n) break;
      const float p = expf(scores[j] - m_new);
      l += p;
#pragma unroll
      for (int d = 0; d < HS; ++d) acc[d] += p * v_tile[j][d];
    }
    m = m_new;
  }
  if (!active) return;
  const float inv = 1.0f / l;
  float* o = out + s.out_index(b, h, i);
#pragma unroll
  for (int d = 0; d < HS; ++d)  // compile-time indices keep acc in registers
    if (d < s.hs) o[d] = acc[d] * inv;
  lse[s.row_stat(b, h, i)] = m + logf(l);
}

// One thread per query row: delta_i, then dq_i (two sweeps over the keys 0..i).
template <int HS>
__global__ void flash_backward_dq_kernel(float* dqkv, float* delta, const float* lse,
                                         const float* dout, const float* qkv, Shape s) {
  __shared__ float k_tile[kKeyTile][HS];
  __shared__ float v_tile[kKeyTile][HS];
  const int bh = blockIdx.y, b = bh / s.NH, h = bh % s.NH;
  const int i = blockIdx.x * kRowsPerBlock + threadIdx.x;
  const bool active = i < s.T;
  float q[HS], g[HS], dq[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    q[d] = active && d < s.hs ? s.q(qkv, b, h, i)[d] : 0.0f;
    g[d] = active && d < s.hs ? dout[s.out_index(b, h, i) + d] : 0.0f;
    dq[d] = 0.0f;
  }
  const float row_lse = active ? lse[s.row_stat(b, h, i)] : 0.0f;
  const int last_row = min(s.T - 1, int(blockIdx.x) * kRowsPerBlock + kRowsPerBlock - 1);
  const std::size_t stride = std::size_t(3) * s.C;
  float row_delta = 0.0f;
  for (int sweep = 0; sweep < 2; ++sweep) {  // 0: delta; 1: dq
    for (int first = 0; first <= last_row; first += kKeyTile) {
      __syncthreads();
      stage_rows<HS>(k_tile, v_tile, s.k(qkv, b, h, 0), s.v(qkv, b, h, 0), stride, first, s.T, s.hs);
      __syncthreads();
      if (!active || first > i) continue;
      const int n = min(kKeyTile, i - first + 1);
      for (int j = 0; j < n; ++j) {
        const float p = expf(s.scale * dot<HS>(k_tile[j], q) - row_lse);
        const float dp = dot<HS>(v_tile[j], g);
        if (sweep == 0) {
          row_delta += p * dp;
        } else {
          const float ds = p * (dp - row_delta);
#pragma unroll
          for (int d = 0; d < HS; ++d) dq[d] += ds * k_tile[j][d];
        }
      }
    }
  }
  if (!active) return;
  delta[s.row_stat(b, h, i)] = row_delta;
  float* out = dqkv + (std::size_t(b) * s.T + i) * 3 * s.C + std::size_t(h) * s.hs;
#pragma unroll
  for (int d = 0; d < HS; ++d)
    if (d < s.hs) out[d] = s.scale * dq[d];
}

// One thread per key row j: dk_j and dv_j over the queries j..T-1.
template <int HS>
__global__ void flash_backward_dkdv_kernel(float* dqkv, const float* delta, const float* lse,
                                           const float* dout, const float* qkv, Shape s) {
  __shared__ float q_tile[kKeyTile][HS];
  __shared__ float g_tile[kKeyTile][HS];
  __shared__ float lse_tile[kKeyTile], delta_tile[kKeyTile];
  const int bh = blockIdx.y, b = bh / s.NH, h = bh % s.NH;
  const int j = blockIdx.x * kRowsPerBlock + threadIdx.x;
  const bool active = j < s.T;
  float k[HS], v[HS], dk[HS], dv[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    k[d] = active && d < s.hs ? s.k(qkv, b, h, j)[d] : 0.0f;
    v[d] = active && d < s.hs ? s.v(qkv, b, h, j)[d] : 0.0f;
    dk[d] = 0.0f;
    dv[d] = 0.0f;
  }
  const int first_row = int(blockIdx.x) * kRowsPerBlock;  // the block's smallest key row
  const std::size_t stride = std::size_t(3) * s.C;
  for (int first = first_row / kKeyTile * kKeyTile; first < s.T; first += kKeyTile) {
    __syncthreads();
    stage_rows<HS>(q_tile, nullptr, s.q(qkv, b, h, 0), nullptr, stride, first, s.T, s.hs);
    stage_rows<HS>(g_tile, nullptr, dout + s.out_index(b, h, 0), nullptr, std::size_t(s.C), first, s.T, s.hs);
    for (int r = threadIdx.x; r < kKeyTile; r += blockDim.x) {
      const int t = first + r;
      lse_tile[r] = t < s.T ? lse[s.row_stat(b, h, t)] : 0.0f;
      delta_tile[r] = t < s.T ? delta[s.row_stat(b, h, t)] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    for (int r = 0; r < kKeyTile; ++r) {
      const int i = first + r;
      if (i < j || i >= s.T) continue;  // causal: queries j..T-1 see key j
      const float p = expf(s.scale * dot<HS>(q_tile[r], k) - lse_tile[r]);
      const float dp = dot<HS>(g_tile[r], v);
      const float ds = p * (dp - delta_tile[r]);
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        dv[d] += p * g_tile[r][d];
        dk[d] += ds * q_tile[r][d];
      }
    }
  }
  if (!active) return;
  float* row = dqkv + (std::size_t(b) * s.T + j) * 3 * s.C + std::size_t(h) * s.hs;
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    if (d >= s.hs) continue;
    row[s.C + d] = s.scale * dk[d];
    row[2 * s.C + d] = dv[d];
  }
}

Shape shape_of(std::size_t seq_len, std::size_t channels, std::size_t num_heads) {
  Shape s;
  s.T = int(seq_len);
  s.C = int(channels);
  s.NH = int(num_heads);
  s.hs = s.C / s.NH;
  s.scale = 1.0f / std::sqrt(float(s.hs));  // as the CPU backend forms it
  return s;
}

dim3 grid_of(std::size_t batch, std::size_t seq_len, std::size_t num_heads) {
  return dim3(unsigned((seq_len + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(batch * num_heads));
}

}  // namespace

void launch_flash_attention_forward(float* out, float* state, const float* qkv, std::size_t batch,
                                    std::size_t seq_len, std::size_t channels,
                                    std::size_t num_heads, cudaStream_t stream) {
  const Shape s = shape_of(seq_len, channels, num_heads);
  const dim3 grid = grid_of(batch, seq_len, num_heads);
  if (s.hs <= 32) flash_forward_kernel<32><<<grid, kRowsPerBlock, 0, stream>>>(out, state, qkv, s);
  else if (s.hs <= 64) flash_forward_kernel<64><<<grid, kRowsPerBlock, 0, stream>>>(out, state, qkv, s);
  else flash_forward_kernel<128><<<grid, kRowsPerBlock, 0, stream>>>(out, state, qkv, s);
  ST_CUDA_CHECK_LAUNCH("flash_forward_kernel");
}

void launch_flash_attention_backward(float* dqkv, const float* lse, float* delta, const float* dout,
                                     const float* qkv, std::size_t batch, std::size_t seq_len,
                                     std::size_t channels, std::size_t num_heads,
                                     cudaStream_t stream) {
  const Shape s = shape_of(seq_len, channels, num_heads);
  const dim3 grid = grid_of(batch, seq_len, num_heads);
  if (s.hs <= 32) {
    flash_backward_dq_kernel<32><<<grid, kRowsPerBlock, 0, stream>>>(dqkv, delta, lse, dout, qkv, s);
    ST_CUDA_CHECK_LAUNCH("flash_backward_dq_kernel");
    flash_backward_dkdv_kernel<32><<<grid, kRowsPerBlock, 0, stream>>>(dqkv, delta, lse, dout, qkv, s);
  } else if (s.hs <= 64) {
    flash_backward_dq_kernel<64><<<grid, kRowsPerBlock, 0, stream>>>(dqkv, delta, lse, dout, qkv, s);
    ST_CUDA_CHECK_LAUNCH("flash_backward_dq_kernel");
    flash_backward_dkdv_kernel<64><<<grid, kRowsPerBlock, 0, stream>>>(dqkv, delta, lse, dout, qkv, s);
  } else {
    flash_backward_dq_kernel<128><<<grid, kRowsPerBlock, 0, stream>>>(dqkv, delta, lse, dout, qkv, s);
    ST_CUDA_CHECK_LAUNCH("flash_backward_dq_kernel");
    flash_backward_dkdv_kernel<128><<<grid, kRowsPerBlock, 0, stream>>>(dqkv, delta, lse, dout, qkv, s);
  }
  ST_CUDA_CHECK_LAUNCH("flash_backward_dkdv_kernel");
}

}  // namespace shardtrain::cuda_impl
