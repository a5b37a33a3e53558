// The measured matrix-product peak of a backend, the denominator of MFU (model FLOPs
// utilisation = achieved training FLOP/s / this peak).
#pragma once
#include "shardtrain/backend/backend.hpp"

namespace shardtrain {

// FLOP/s of the backend's matmul_forward on a 1024 x 1024 x 1024 product: the best of `repeats`
// timed runs after two warm-ups (about 0.15 s on one CPU core; the best of ten is stable to ~2% here).
double measure_matmul_peak_flops(Backend& backend, int repeats = 10);

}  // namespace shardtrain
