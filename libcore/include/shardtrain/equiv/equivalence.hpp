// equiv (libcore): are two runs the same computation? Compares two step logs (loss per step), two
// parameter files (HDF5 float datasets by tensor name) or two checkpoints (every logical tensor:
// parameters, optimizer moments and the rest, read through ckpt/read.hpp whatever the layout that
// wrote them) and gives a verdict:
//   BITWISE   every compared value has identical bits, and both sides hold the same tensors/steps
//   WITHIN    not bitwise, but every element satisfies the tolerance rule below
//   DIFFERENT some element fails the rule, or a tensor/step is present on one side only, or
//             shapes or element types differ
// Tolerance rule, per element pair (a from file A, b from file B, the reference):
//   pass  <=>  bits(a) == bits(b)  or  (a, b both NaN)
//              or  |a - b| <= atol + rtol * |b|          (computed in double)
//              or  ulp(a, b) <= ulps
// With the defaults (0, 0, 0) the rule passes exactly the pairs with a == b as numbers (so +0 vs
// -0 is WITHIN, not BITWISE). Integer tensors of a checkpoint (counters) pass only when equal.
// Used by equiv-check(1).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardtrain::equiv {

// Distance in units in the last place: the number of representable values between a and b, via
// the ordered-integer trick (sign-magnitude bits mapped to a monotone integer line, +0 and -0 both
// 0). Opposite signs: the two distances to zero add up. Both NaN: 0. NaN against a number:
// kInfiniteUlp. Float32 for parameters; float64 for losses in step logs.
inline constexpr std::uint64_t kInfiniteUlp = std::numeric_limits<std::uint64_t>::max();
std::uint64_t ulp_distance(float a, float b);
std::uint64_t ulp_distance(double a, double b);

struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
  std::uint64_t ulps = 0;
};

enum class Verdict { kBitwise = 0, kWithin = 1, kDifferent = 2 };
const char* verdict_name(Verdict v);  // "BITWISE", "WITHIN", "DIFFERENT"

// One compared tensor (parameters) or series (step logs: the tensor "loss" over the common steps).
struct TensorDiff {
  std::string name;
  std::vector<std::int64_t> shape_a, shape_b;  // empty when absent on that side
  std::string dtype;                            // "float32", "float64" (checkpoints also "int32", "int64", ...)
  std::uint64_t count = 0;                      // elements compared
  double max_abs = 0.0;                         // max |a - b|; +inf when some pair is NaN vs number
  double max_rel = 0.0;                         // max |a - b| / |b| (0 when a == b; +inf when b == 0 != a)
  std::uint64_t max_ulp = 0;                    // kInfiniteUlp for NaN vs number
  std::uint64_t bits_differ = 0;                // elements whose bits differ
  std::uint64_t outside = 0;                    // elements failing the tolerance rule
  std::int64_t first_outside = -1;              // flat index (step logs: the step) of the first failing element
  std::string problem;                          // "only in A", "only in B", "shape mismatch: (2,3) vs (6,)", "dtype mismatch (...)", ""
  Verdict verdict = Verdict::kBitwise;
};

// Element-wise comparison of equally long arrays (a: candidate, b: reference).
TensorDiff compare_values(const std::string& name, const float* a, const float* b, std::size_t n, const Tolerance& tol);
TensorDiff compare_values(const std::string& name, const double* a, const double* b, std::size_t n, const Tolerance& tol);

enum class InputKind { kAuto, kStepLog, kParams, kCheckpoint };
const char* kind_name(InputKind k);  // "auto", "steps", "params", "checkpoint"

struct EquivOptions {
  std::string a, b;                 // paths; A is compared against the reference B
  // auto: .jsonl -> steps; .h5/.hdf5 -> params; a folder -> checkpoint (a step_<N> folder, or a
  // checkpoint folder: the step_<N> its `latest` names, else its newest valid one)
  InputKind kind = InputKind::kAuto;
  std::string group_a, group_b;     // params: dataset group of each file ("" = the whole file)
  Tolerance tolerance;
};

struct EquivReport {
  EquivOptions options;
  InputKind kind = InputKind::kParams;  // resolved
  // checkpoint: the step_<N> folders read and their steps ("" / -1 otherwise)
  std::string checkpoint_a, checkpoint_b;
  std::int64_t step_a = -1, step_b = -1;
  std::vector<TensorDiff> tensors;      // sorted by name
  Verdict verdict = Verdict::kBitwise;
  // Fixed-width table: '#' header with the inputs and tolerance, a units row, one row per tensor,
  // and the verdict line ("verdict: BITWISE" | "verdict: WITHIN tolerance" | "verdict: DIFFERENT").
  std::string table() const;
  nlohmann::json to_json() const;  // infinite values are written as null
};

// Reads both inputs and compares them. Unusable input (missing file, not HDF5 / not JSONL, an
// unknown extension without a kind, no float dataset or step in common, a malformed JSONL line, a
// folder that is no valid checkpoint, checkpoints with no tensor in common) throws UsageError
// naming the file (exit code 2). Differences are never exceptions: they are in
// the report (verdict DIFFERENT).
EquivReport compare_files(const EquivOptions& options);

// Process exit code of a verdict: 0 for BITWISE or WITHIN, 1 for DIFFERENT.
int exit_code(Verdict v);

}  // namespace shardtrain::equiv
