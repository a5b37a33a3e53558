// Parameter registry: every trainable tensor's stable name, logical shape and place in the flat
// parameter buffer (contract 3). Gradients and optimizer moments use the same offsets in buffers
// of the same length, so one registry describes all of them.
//
// Flat layout (llm.c style): wte, wpe, then each block's 12 tensors contiguously
// (h.L.ln_1.weight ... h.L.mlp.proj.bias), then ln_f.weight, ln_f.bias. A block's tensors are
// contiguous so a block can later be one sharding unit.
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

struct ParameterInfo {
  std::string name;                  // e.g. "h.3.attn.qkv.weight"
  std::vector<std::int64_t> shape;   // logical shape, PyTorch layout (Linear weight is (out, in))
  std::size_t offset = 0;            // first element in the flat buffer
  std::size_t numel = 0;             // product of shape
  bool weight_decay = false;         // AdamW decay: matrices and embeddings only
  InitKind init = InitKind::kZeros;
};

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
  explicit ParameterRegistry(const ModelConfig& config);

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

 private:
  std::size_t add(const std::string& name, std::vector<std::int64_t> shape, bool decay, InitKind init);

  std::vector<ParameterInfo> tensors_;
  std::vector<BlockOffsets> blocks_;
  std::vector<ParameterUnit> units_;
  std::size_t total_ = 0, wte_ = 0, wpe_ = 0, lnf_w_ = 0, lnf_b_ = 0;
};

}  // namespace shardtrain
