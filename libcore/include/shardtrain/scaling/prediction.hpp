// scale-bench predict: the step model's deterministic simulation printed as a table (the inputs,
// then one row per W or per topology x layout with the terms of T) and as JSON
// ({"format": "shardtrain-scaling-prediction", "model", "rows"}). The prices are the step model's
// (stepmodel/step_model.hpp, two_level.hpp); this file only lays them out.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/stepmodel/two_level.hpp"

namespace shardtrain::scaling {

// One level: W, step, speedup, E and the terms, for each W of `workers`.
std::string prediction_table(const StepModel& model, const std::vector<int>& workers);
nlohmann::json prediction_json(const StepModel& model, const std::vector<int>& workers);

// Two levels: every topology x layout (step, comm, its intra and inter parts, speedup, E) and the
// per-collective choices.
std::string topology_prediction_table(const StepModel& model, const std::vector<Topology>& topologies,
                                      const std::vector<CommLayout>& layouts);
nlohmann::json topology_prediction_json(const StepModel& model, const std::vector<Topology>& topologies,
                                        const std::vector<CommLayout>& layouts);

}  // namespace shardtrain::scaling
