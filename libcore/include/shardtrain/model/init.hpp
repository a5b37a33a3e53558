// Layout-independent initialisation (contract 4 of docs/ARCHITECTURE.md): an element's initial value is a pure function
// of (seed, tensor name, logical element index), drawn through the counter-based Philox4x32-10
// generator, so any shard of any tensor initialises itself without the rest of the tensor.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "shardtrain/model/parameters.hpp"

namespace shardtrain {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key);

// Standard normal for (seed, stream, index): counter = (index lo, index hi, stream lo, stream hi),
// key = (seed lo, seed hi); Box-Muller on the first two outputs, computed in double.
double philox_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// Writes elements [begin, begin + count) of the logical tensor `info` (flattened row-major) into
// `out` (host memory): the GPT-2 scheme of InitKind with n_layer for the residual scaling.
void init_tensor_range(const ParameterInfo& info, std::uint64_t seed, int n_layer, std::size_t begin,
                       std::size_t count, float* out);

// Elements [begin, begin + count) of the registry's LOCAL flat buffer (tensor parallelism: each
// local element takes the value of the logical element it stands for, so a TP shard is bitwise the
// slice of the unsplit tensor; padding elements are 0) into `out` (host memory).
void init_flat_range(const ParameterRegistry& registry, std::uint64_t seed, int n_layer, std::size_t begin,
                     std::size_t count, float* out);

// The whole flat parameter vector of a registry (host memory), for unsharded layouts.
std::vector<float> init_parameters(const ParameterRegistry& registry, std::uint64_t seed, int n_layer);

}  // namespace shardtrain
