#include "shardtrain/scaling/prediction.hpp"

#include <cstdio>

#include "shardtrain/base/number_text.hpp"

namespace shardtrain::scaling {

std::string prediction_table(const StepModel& m, const std::vector<int>& workers) {
  m.validate();
  std::string s = "model: " + std::string(scaling_name(m.scaling)) + " scaling, compute " +
                  number_text("%.3f", m.compute_s * 1e3) + " ms per step at W=1, " + number_text("%g", m.tokens_per_step) +
                  " tokens per step at W=1\n";
  s += "       busbw " + number_text("%.3f", m.busbw_Bps / 1e9) + " GB/s, alpha " + number_text("%.2f", m.alpha_s * 1e6) +
       " us per ring step, overlap " + number_text("%.2f", m.overlap) + ", straggler s " + number_text("%.4f", m.straggler) + "\n";
  for (const auto& c : m.collectives)
    s += std::string("       per step: ") + number_text("%g", c.calls) + " x " + op_name(c.op) + " of " +
         number_text("%.0f", c.bytes) + " bytes\n";
  s += "T(W) = compute + exposed + compute x s x log2 W; exposed = max((1 - overlap) x comm, what outlasts the "
       "compute of its pass: forward " + number_text("%.2f", m.forward_share) + ", backward " +
       number_text("%.2f", m.backward_share) + " of it) (times in ms)\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%6s %10s %8s %7s %10s %10s %10s %10s %12s\n", "W", "step_ms", "speedup", "E",
                "compute", "comm", "exposed", "straggler", "tokens/s");
  s += line;
  for (int w : workers) {
    const StepTerms t = predict(m, w);
    std::snprintf(line, sizeof(line), "%6d %10.3f %8.3f %7.3f %10.3f %10.3f %10.3f %10.3f %12.1f\n", w,
                  t.step_s * 1e3, t.speedup, t.efficiency, t.compute_s * 1e3, t.comm_s * 1e3, t.exposed_comm_s * 1e3,
                  t.straggler_s * 1e3, t.tokens_per_s);
    s += line;
  }
  return s;
}

nlohmann::json prediction_json(const StepModel& m, const std::vector<int>& workers) {
  nlohmann::json rows = nlohmann::json::array();
  for (int w : workers) rows.push_back(predict(m, w).to_json());
  return {{"format", "shardtrain-scaling-prediction"}, {"model", m.to_json()}, {"rows", rows}};
}

std::string topology_prediction_table(const StepModel& m, const std::vector<Topology>& topologies,
                                      const std::vector<CommLayout>& layouts) {
  m.validate();
  auto link = [](const char* name, const Link& l) {
    return std::string(name) + (l.known() ? " busbw " + number_text("%.3f", l.busbw_Bps / 1e9) + " GB/s, alpha " +
                                                number_text("%.2f", l.alpha_s * 1e6) + " us"
                                          : " unknown");
  };
  std::string s = "links: " + link("intra-node", m.intra) + "; " + link("inter-node", m.inter) + "; one-level busbw " +
                  number_text("%.3f", m.busbw_Bps / 1e9) + " GB/s, alpha " + number_text("%.2f", m.alpha_s * 1e6) + " us\n";
  char line[256];
  std::snprintf(line, sizeof line, "%9s %13s %10s %10s %10s %10s %8s %7s %12s\n", "topology", "layout", "step_ms", "comm",
                "intra", "inter", "speedup", "E", "tokens/s");
  s += line;
  std::string details;
  for (const auto& t : topologies)
    for (CommLayout l : layouts) {
      std::vector<std::string> choices;
      const StepTerms r = predict_on(m, t, l, &choices);
      std::snprintf(line, sizeof line, "%9s %13s %10.3f %10.3f %10.3f %10.3f %8.3f %7.3f %12.1f\n", t.describe().c_str(),
                    comm_layout_name(l), r.step_s * 1e3, r.comm_s * 1e3, r.intra_comm_s * 1e3, r.inter_comm_s * 1e3,
                    r.speedup, r.efficiency, r.tokens_per_s);
      s += line;
      for (const auto& c : choices) details += "  " + t.describe() + " " + comm_layout_name(l) + ": " + c + "\n";
    }
  return s + "per collective (one call):\n" + details;
}

nlohmann::json topology_prediction_json(const StepModel& m, const std::vector<Topology>& topologies,
                                        const std::vector<CommLayout>& layouts) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& t : topologies)
    for (CommLayout l : layouts) {
      std::vector<std::string> choices;
      nlohmann::json row = predict_on(m, t, l, &choices).to_json();
      row["topology"] = {{"nodes", t.nodes}, {"ranks_per_node", t.ranks_per_node}};
      row["layout"] = comm_layout_name(l);
      row["collectives"] = choices;
      rows.push_back(std::move(row));
    }
  return {{"format", "shardtrain-scaling-prediction"}, {"model", m.to_json()}, {"rows", rows}};
}

}  // namespace shardtrain::scaling
