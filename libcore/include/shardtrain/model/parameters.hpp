// Parameter registry: every trainable tensor's stable name, logical shape and place in the flat
// parameter buffer (contract 3 of docs/ARCHITECTURE.md). Gradients and optimizer moments use the same offsets in buffers
// of the same length, so one registry describes all of them.
//
// Flat layout (llm.c style): wte, wpe, then each block's 12 tensors contiguously
// (h.L.ln_1.weight ... h.L.mlp.proj.bias), then ln_f.weight, ln_f.bias. A block's tensors are
// contiguous so a block can later be one sharding unit.
//
// Tensor parallelism (Megatron's split over T = TensorParallelPlace::size ranks): a registry built
// for a place describes THIS rank's local tensors, with the same names and order. Each tensor
// keeps its logical shape (`logical_shape`, what checkpoints and init see) and says how the local
// tensor maps onto it (`split`, logical_runs()):
//   wte.weight        (Vp/T, C), Vp = V rounded up to T     vocabulary rows [r*Vp/T, (r+1)*Vp/T);
//                                                           rows >= V are padding (never trained,
//                                                           never in a checkpoint)
//   attn.qkv.weight   (3C/T, C), attn.qkv.bias (3C/T)       the q, k and v rows of heads
//                                                           [r*NH/T, (r+1)*NH/T) (column-parallel)
//   attn.proj.weight  (C, C/T)                              input columns of the same heads (row-parallel)
//   mlp.fc.weight     (4C/T, C), mlp.fc.bias (4C/T)         rows [r*4C/T, ...) (column-parallel)
//   mlp.proj.weight   (C, 4C/T)                             input columns [r*4C/T, ...) (row-parallel)
//   everything else (wpe, LayerNorms, the two proj biases)  replicated: the whole tensor on every rank
// At T = 1 every tensor is whole and the layout is exactly the unsplit one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/model/config.hpp"

namespace shardtrain {

// How a tensor is initialised (GPT-2 scheme).
enum class InitKind {
  kNormal,          // normal(0, 0.02): matrices and embeddings
  kNormalResidual,  // normal(0, 0.02 / sqrt(2 n_layer)): residual output projections
  kZeros,           // biases
  kOnes,            // LayerNorm gains
};

// How a local tensor relates to its logical tensor under tensor parallelism (see above).
enum class TpSplit {
  kReplicated,  // the whole tensor
  kRows,        // a contiguous band of rows (dim 0)
  kQkvRows,     // three bands of rows, one in each of the q, k, v thirds of dim 0
  kColumns,     // a band of columns (dim 1) of every row
  kVocabRows,   // a band of rows of the padded vocabulary; rows past the logical vocabulary are padding
};

// This rank's place in the tensor-parallel group: T = size ranks, this one is `rank`.
struct TensorParallelPlace {
  int size = 1;
  int rank = 0;
  bool split() const { return size > 1; }
};

// Throws UsageError naming the numbers when `config` cannot be split over `tp` ranks (heads, 4C or
// the world not divisible). world_size 0: not checked.
void validate_tensor_parallel(const ModelConfig& config, int tp, int world_size = 0);
// The vocabulary padded to a multiple of tp (the local wte rows are padded_vocab / tp).
std::int64_t padded_vocab(const ModelConfig& config, int tp);

// One contiguous run of a local tensor inside its logical tensor (flat, row-major element indices).
struct LogicalRun {
  std::size_t local_offset = 0;    // first element in the local tensor
  std::size_t logical_offset = 0;  // first element in the logical tensor
  std::size_t count = 0;
};

struct ParameterInfo {
  std::string name;                  // e.g. "h.3.attn.qkv.weight"
  std::vector<std::int64_t> shape;   // LOCAL shape on this rank (the logical one at T = 1)
  std::size_t offset = 0;            // first element in the flat buffer
  std::size_t numel = 0;             // product of shape
  bool weight_decay = false;         // AdamW decay: matrices and embeddings only
  InitKind init = InitKind::kZeros;
  std::vector<std::int64_t> logical_shape;  // the unsplit tensor's shape (checkpoints, init)
  TpSplit split = TpSplit::kReplicated;
  std::size_t logical_numel() const;
};

// The runs that map `info`'s local elements onto its logical tensor for `place`, in local order.
// Local elements in no run are padding (kVocabRows past the vocabulary). Replicated tensors and
// T = 1: one run covering the whole tensor.
std::vector<LogicalRun> logical_runs(const ParameterInfo& info, const TensorParallelPlace& place);

// Offsets of one block's tensors in the flat buffer.
struct BlockOffsets {
  std::size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
};

// A sharding unit (FSDP's "flat parameter"): a contiguous range [begin, end) of the flat buffer
// that is gathered, reduced and norm-summed as one piece. Units: "embeddings" (wte, wpe), "h.<l>"
// for each block, "ln_f" (the final norm), in flat-buffer order.
struct ParameterUnit {
  std::string name;
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};

class ParameterRegistry {
 public:
  explicit ParameterRegistry(const ModelConfig& config, TensorParallelPlace place = {});

  const std::vector<ParameterInfo>& tensors() const { return tensors_; }
  std::size_t total() const { return total_; }
  // Throws UsageError naming the tensor when `name` is not a parameter of this model.
  const ParameterInfo& find(const std::string& name) const;
  const ParameterInfo* try_find(const std::string& name) const;

  std::size_t wte() const { return wte_; }
  std::size_t wpe() const { return wpe_; }
  std::size_t lnf_w() const { return lnf_w_; }
  std::size_t lnf_b() const { return lnf_b_; }
  const BlockOffsets& block(int layer) const { return blocks_.at(layer); }
  const std::vector<ParameterUnit>& units() const { return units_; }
  const TensorParallelPlace& place() const { return place_; }
  // logical_runs of a tensor of this registry.
  std::vector<LogicalRun> runs(const ParameterInfo& info) const { return logical_runs(info, place_); }
  // fn(tensor, local, logical, count) for every piece of a logical run inside the LOCAL flat range
  // [begin, end), in flat order: `local` is the piece's first flat (registry) index, `logical` its
  // first element in the logical tensor. Padding elements are in no piece. The one walk behind
  // layout-independent init, checkpoint pieces and restores under tensor parallelism.
  template <typename Fn>
  void for_each_logical_piece(std::size_t begin, std::size_t end, Fn&& fn) const {
    for (const auto& t : tensors_) {
      if (t.offset + t.numel <= begin || t.offset >= end) continue;
      for (const LogicalRun& run : runs(t)) {
        const std::size_t first = t.offset + run.local_offset;
        const std::size_t lo = begin > first ? begin : first;
        const std::size_t hi = end < first + run.count ? end : first + run.count;
        if (lo < hi) fn(t, lo, run.logical_offset + (lo - first), hi - lo);
      }
    }
  }

 private:
  std::size_t add(const std::string& name, std::vector<std::int64_t> logical_shape, bool decay, InitKind init,
                  TpSplit split = TpSplit::kReplicated);

  std::vector<ParameterInfo> tensors_;
  std::vector<BlockOffsets> blocks_;
  std::vector<ParameterUnit> units_;
  std::size_t total_ = 0, wte_ = 0, wpe_ = 0, lnf_w_ = 0, lnf_b_ = 0;
  TensorParallelPlace place_;
  std::int64_t padded_vocab_ = 0;
};

}  // namespace shardtrain
