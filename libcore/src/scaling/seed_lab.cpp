#include "shardtrain/scaling/seed_lab.hpp"

namespace shardtrain::scaling {

// The seed's lab publishes only its result (1.0/1.9/3.7/7.0/13.2x at 1/2/4/8/16 workers), its
// 120 ms of local compute per step (weak scaling: every worker keeps its batch) and the shape of
// its model (ring all-reduce, a straggler penalty growing with log2 W). Dividing out, the step
// at W is W / S(W) times the one-worker step: 1.053, 1.081, 1.143, 1.212 at W = 2, 4, 8, 16. The
// penalty grows about linearly in W at large W, which only the ring's 2(W-1) x alpha term can
// give: without alpha (bandwidth + straggler only) the best fit misses by 1.5% (13.39x at 16);
// without the straggler the best misses by 0.59%. With round hardware numbers:
//   gradients 32 MiB in 16 buckets of 2 MiB (an 8.4M-parameter fp32 model), one all-reduce per
//   bucket per step: 2(W-1)/W x 3.36 ms of bandwidth at busbw 10 GB/s (a 100 Gb/s link);
//   alpha 30 us per ring step (a socket transport over Ethernet): 16 x 2(W-1) x 30 us;
//   s = 0.0107: the slowest of W workers is 1.07% of the compute slower per doubling of W
//   (the minimax choice for these hardware numbers), no overlap (the lab overlaps nothing);
// the speedups are 1.000/1.911/3.679/7.036/13.166x, at most 0.58% from the lab's (W = 2).
// The fit is unique to the extent the four speedups (two significant figures each) allow: they
// fix the sums 16 x alpha and bytes/busbw only to within about 10%, so this is one physically
// sensible point of a small family, not a measurement of the lab's hardware.
StepModel seed_lab_model() {
  StepModel m;
  m.compute_s = 0.120;
  m.scaling = Scaling::kWeak;
  m.tokens_per_step = 8192;  // any value: speedup and E do not depend on it
  m.collectives = {{CollectiveOp::kAllReduce, 2.0 * 1024 * 1024, 16}};
  m.busbw_Bps = 10e9;
  m.alpha_s = 30e-6;
  m.overlap = 0;
  m.straggler = 0.0107;
  m.inputs = {{"example", "seed-lab"},
              {"source", "the seed's all-reduce scaling lab: 120 ms local compute, ring all-reduce, "
                         "logarithmic straggler penalty; speedups 1.0/1.9/3.7/7.0/13.2x at 1/2/4/8/16"}};
  return m;
}

std::vector<std::pair<int, double>> seed_lab_speedups() { return {{1, 1.0}, {2, 1.9}, {4, 3.7}, {8, 7.0}, {16, 13.2}}; }

}  // namespace shardtrain::scaling
