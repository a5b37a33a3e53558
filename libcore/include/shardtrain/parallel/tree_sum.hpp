// The canonical binary-tree sum of contract 2 over values pushed in index order: a binary
// counter that merges two partial sums of equal level as left + right. For 2^k values the
// result is exactly ((v0 + v1) + (v2 + v3)) + ..., so a rank that tree-sums its own contiguous,
// power-of-two run of micro-batches holds one subtree, and the canonical all-reduce adds the
// upper levels across ranks in the same fixed order. DDP and every ZeRO stage use this one piece
// for gradients and loss sums, which is what makes their results bitwise equal.
#pragma once
#include <functional>
#include <utility>
#include <vector>

namespace shardtrain {

template <typename Value>
class TreeSum {
 public:
  // add(left, right) returns left + right (it may reuse left's storage).
  using Add = std::function<Value(Value left, Value right)>;
  explicit TreeSum(Add add) : add_(std::move(add)) {}

  void push(Value value) {
    int level = 0;
    while (!stack_.empty() && stack_.back().first == level) {
      Value left = std::move(stack_.back().second);
      stack_.pop_back();
      value = add_(std::move(left), std::move(value));
      ++level;
    }
    stack_.emplace_back(level, std::move(value));
  }
  // Partial sums held: 1 after a power-of-two number of pushes.
  std::size_t partials() const { return stack_.size(); }
  // The root (requires partials() == 1); the tree is empty afterwards.
  Value take() {
    Value root = std::move(stack_.back().second);
    stack_.clear();
    return root;
  }
  void clear() { stack_.clear(); }

 private:
  Add add_;
  std::vector<std::pair<int, Value>> stack_;
};

}  // namespace shardtrain
