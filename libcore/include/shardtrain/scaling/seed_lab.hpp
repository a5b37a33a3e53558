// The seed's all-reduce scaling lab (120 ms local compute, ring all-reduce, logarithmic straggler
// penalty; speedups 1.0/1.9/3.7/7.0/13.2x at 1/2/4/8/16 workers) as a step model: the parameters
// that reproduce it (the choice is argued in seed_lab.cpp). `scale-bench predict --example seed-lab`.
#pragma once
#include <utility>
#include <vector>

#include "shardtrain/stepmodel/step_model.hpp"

namespace shardtrain::scaling {

StepModel seed_lab_model();
std::vector<std::pair<int, double>> seed_lab_speedups();  // the lab's published (W, speedup)

}  // namespace shardtrain::scaling
