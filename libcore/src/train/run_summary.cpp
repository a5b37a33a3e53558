#include "shardtrain/train/run_summary.hpp"

#include <cstdio>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/telemetry/rank_hosts.hpp"

namespace shardtrain {

RunSummary read_run_summary(const std::string& path, const std::string& what) {
  return json_fields::read<RunSummary>(JsonFile::read(path, what), "");
}

Baseline read_baseline(const std::string& path) {
  const RunSummary base = read_run_summary(path, "the --baseline run summary (a finished ddp-train/fsdp-train run's summary.json)");
  if (!(base.throughput_tokens_per_s > 0))
    throw UsageError(path + ": the --baseline run summary has no positive throughput_tokens_per_s; pass a finished "
                            "ddp-train/fsdp-train run's summary.json");
  return {path, base.throughput_tokens_per_s, base.world_size};
}

std::string summary_paragraph(const RunSummary& s) {
  const int world = s.world_size;
  const double median_step = s.median_step_s;
  std::string holdout, scaling;
  if (s.eval) holdout = ", hold-out loss " + std::to_string(s.eval->loss).substr(0, 5) + " nats/token";
  if (s.scaling)
    scaling = "; scaling efficiency E(" + std::to_string(world) + ") = " +
              std::to_string(s.scaling->scaling_efficiency).substr(0, 5);
  std::string datasheet;  // null where the device is not in the datasheet table
  if (s.mfu_datasheet)
    datasheet = " and " + std::to_string(100.0 * *s.mfu_datasheet).substr(0, 4) + "% of the " +
                (s.device_name.empty() ? std::string("device") : s.device_name) + "'s datasheet dense " +
                precision_name(s.precision) + " peak";
  // A job across nodes says which ranks ran where: "across 3 hosts (node1: 0; node2: 1; node3: 2)".
  const auto ranks_of_host = RankHosts{"", s.rank_hosts}.ranks_by_host();
  std::string hosts;
  if (ranks_of_host.size() > 1) {
    hosts = " across " + std::to_string(ranks_of_host.size()) + " hosts (";
    for (const auto& [host, ranks] : ranks_of_host) {
      hosts += (hosts.back() == '(' ? "" : "; ") + host + ":";
      for (std::size_t i = 0; i < ranks.size(); ++i) hosts += (i ? "," : " ") + std::to_string(ranks[i]);
    }
    hosts += ")";
  }
  std::string startup;
  if (s.startup) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), " The first step began %.1f s after launch (set-up %.1f s, resume %.1f s, "
                  "library choice and peak %.1f s).", s.startup->to_first_step_s(), s.startup->setup_s,
                  s.startup->resume_s, s.startup->loop_setup_s);
    startup = buf;
  }
  char paragraph[2600];
  std::snprintf(paragraph, sizeof(paragraph),
                "summary: trained %lld steps (%s tokens) of a %s-parameter decoder on %d rank%s (%s)%s in %.1f s on %s. "
                "Loss went from %.3f to %.3f%s. Steady throughput %.0f tokens/s (median step %.3f s), MFU %.1f%% of "
                "the %.1f GFLOP/s per-rank matmul peak (%s)%s; data loading took %.2f%% and exposed communication "
                "%.2f%% of step time%s.%s Step log: %s; summary: %s.",
                (long long)s.steps, format_count(double(s.tokens)).c_str(), format_count(s.parameters).c_str(), world,
                world == 1 ? "" : "s", s.layout.c_str(), hosts.c_str(), s.train_seconds, s.backend.c_str(), s.first_loss,
                s.final_loss, holdout.c_str(), s.throughput_tokens_per_s, median_step, 100.0 * s.mfu,
                s.peak_flops_per_rank / 1e9, s.mfu_peak.basis.c_str(), datasheet.c_str(),
                100.0 * s.per_rank_medians.at("data_s").by_rank.at(0) / median_step,
                100.0 * s.per_rank_medians.at("comm_exposed_s").by_rank.at(0) / median_step, scaling.c_str(),
                startup.c_str(), s.step_log.c_str(), s.summary.c_str());
  return paragraph;
}

}  // namespace shardtrain
