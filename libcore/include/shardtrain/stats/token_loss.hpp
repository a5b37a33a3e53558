// The loss of one predicted token, the one definition every hold-out figure uses (the trainer's
// hold-out loss and release-gate's evaluation, train/evaluation.hpp): the cross-entropy
//   loss = ln(sum_k exp(l_k - m)) - (l_target - m),   m = max_k l_k,
// evaluated in double from the fp32 logits `logits[0, vocab)`, in nats. Exact even where
// softmax(l)_target underflows in fp32; a pure function of the logits, so two evaluations that see
// the same logits report the same loss bit for bit.
#pragma once

namespace shardtrain {

double token_loss(const float* logits, int vocab, int target);

}  // namespace shardtrain
