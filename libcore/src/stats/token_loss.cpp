#include "shardtrain/stats/token_loss.hpp"

#include <algorithm>
#include <cmath>

namespace shardtrain {

double token_loss(const float* logits, int vocab, int target) {
  const double m = *std::max_element(logits, logits + vocab);
  double z = 0;
  for (int k = 0; k < vocab; ++k) z += std::exp(double(logits[k]) - m);
  return std::log(z) - (double(logits[target]) - m);
}

}  // namespace shardtrain
