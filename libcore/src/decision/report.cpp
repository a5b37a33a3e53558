#include "shardtrain/decision/report.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "shardtrain/base/gnuplot.hpp"
#include "shardtrain/decision/costs.hpp"
#include "shardtrain/decision/utility.hpp"

namespace shardtrain {
namespace {

std::string num(double v, int decimals = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string num(const std::optional<double>& v, int decimals = 4) { return v ? num(*v, decimals) : "-"; }

std::string general(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The utility with the policy's numbers substituted into its formula (decision/utility.hpp).
std::string utility_lines(const UtilityEstimate& u) {
  std::ostringstream t;
  const auto& m = u.model;
  t << "  utility of promoting over " << u.fallback << ": E = H (v N S - c L) - B P = " << general(m.horizon_days)
    << " x (" << general(m.value_per_nat_token) << " x " << general(m.served_tokens_per_day) << " x " << num(u.loss_saved, 6)
    << " - " << general(m.cost_per_ms_p99_day) << " x " << num(u.latency_delta_ms, 4) << ") - "
    << general(m.bad_release_cost) << " x " << num(u.regret_probability, 4) << " = " << num(u.expected_utility, 2) << " ("
    << std::lround(u.level * 100) << "% interval " << num(u.lower, 2) << " to " << num(u.upper, 2) << ")\n"
    << "    S = " << num(u.fallback_loss, 6) << " - " << num(u.candidate_loss, 6) << " nats/token saved on " << u.sequences
    << " paired sequences (" << num(u.loss_saved_lower, 6) << " to " << num(u.loss_saved_upper, 6) << "); L = "
    << (u.latency_applicable ? num(u.candidate_p99_ms, 4) + " - " + num(u.fallback_p99_ms, 4) + " ms p99"
                             : std::string("0 (not applicable against an n-gram)"))
    << "; P(regret) = " << u.regret_resamples << " / " << u.resamples << " resamples with U < 0 "
    << (u.regret_within_bound() ? "< " : ">= ") << general(m.regret_bound) << "\n";
  return t.str();
}

}  // namespace

std::string write_reliability_plot(const CheckpointEvaluation& e, const std::string& out_dir) {
  require_plain_plot_folder(out_dir, "--out");
  const CalibrationSummary& cal = e.scores.calibration;
  std::ostringstream d;
  d << "# lower upper count mean_confidence accuracy ('?': empty bin)\n";
  for (const auto& b : cal.reliability)
    d << b.lower << " " << b.upper << " " << double(b.count) << " "
      << (b.mean_confidence ? num(*b.mean_confidence, 6) : "?") << " " << (b.accuracy ? num(*b.accuracy, 6) : "?") << "\n";
  const std::string dat = out_dir + "/reliability.dat";
  std::ostringstream g;
  g << gnuplot_script_head(out_dir + "/reliability.svg",
                           "Reliability: top-1 accuracy per confidence bin (ECE " + num(cal.ece) + ", " +
                               num(double(cal.bins), 0) + " bins)")
    << "set xlabel 'confidence (max next-token probability)'\nset ylabel 'accuracy'\n"
    << "set xrange [0:1]\nset yrange [0:1]\nset key top left box opaque\nset datafile missing '?'\n"
    << "set style fill solid 0.6 border -1\n"
    << "plot '" << dat << "' using (($1+$2)/2):5:($2-$1) with boxes lc rgb '#1f77b4' title 'accuracy per bin',\\\n"
    << "  x with lines dt 2 lw 2 lc rgb 'gray40' title 'perfect calibration',\\\n"
    << "  '" << dat << "' using 4:5 with points pt 7 ps 1.2 lc rgb '#d62728' title 'accuracy at the bin mean confidence'\n";
  return draw_gnuplot(out_dir, "reliability", d.str(), g.str());
}

std::string evaluation_markdown(const CheckpointEvaluation& e, const std::string& svg) {
  const HoldoutSummary& s = e.scores;
  const CalibrationSummary& cal = s.calibration;
  std::ostringstream m;
  m << "# Release evaluation\n\n";
  if (e.is_checkpoint())
    m << "Checkpoint `" << e.checkpoint.folder << "` (step " << e.checkpoint.step << ", manifest sha256 `"
      << e.checkpoint.manifest_sha256.substr(0, 16) << "`), trained with "
      << "cutoff `" << e.checkpoint.data_cutoff << "`.\n\n";
  else
    m << "n-gram baseline of order " << e.order << ".\n\n";
  const HoldoutIdentity& h = e.holdout;
  m << "Hold-out: documents of `" << h.data << "` after `" << h.cutoff << "` (selection `"
    << h.selection_snapshot_id.substr(0, 12) << "`), " << h.samples << " sequences of " << h.seq_len << " tokens.\n\n";
  m << "| figure | value |\n|---|---|\n"
    << "| mean loss (nats/token) | " << num(s.loss) << " (95% interval " << num(s.interval.lower) << " to "
    << num(s.interval.upper) << ") |\n"
    << "| perplexity | " << num(s.perplexity, 3) << " |\n"
    << "| scored tokens | " << num(s.tokens, 0) << " |\n"
    << "| top-1 / top-5 accuracy | " << num(cal.top1_accuracy) << " / " << num(cal.top5_accuracy) << " |\n"
    << "| ECE (" << cal.bins << " bins) | " << num(cal.ece) << " |\n"
    << "| Brier score | " << num(cal.brier) << " |\n";
  if (e.is_checkpoint()) {
    const LatencyProbe& l = e.latency;
    m << "| forward tokens/s | " << num(l.forward_tokens_per_s, 0) << " |\n"
      << "| ms per sequence p50 / p99 (batch " << l.batch << ") | " << num(l.ms_per_sequence_p50, 2) << " / "
      << num(l.ms_per_sequence_p99, 2) << " |\n"
      << "| evaluated tokens/s (whole evaluation) | " << num(e.evaluated_tokens_per_s, 0) << " |\n";
  }
  if (e.training)
    m << "| training throughput (tokens/s) | " << num(e.training->throughput_tokens_per_s, 0) << " |\n"
      << "| training E(W) | " << num(e.training->scaling_efficiency, 3) << " (W = "
      << (e.training->world_size ? std::to_string(*e.training->world_size) : std::string("null")) << ") |\n";
  m << "\n## Slices\n\nA slice is flagged when its interval lies wholly above the mean loss.\n\n"
    << "| slice | tokens | loss | 95% interval | |\n|---|---|---|---|---|\n";
  for (const auto& sl : s.slices) {
    bool flagged = false;
    for (const auto& k : s.slices_worse_than_mean) flagged = flagged || k == sl.key;
    m << "| " << sl.key << " | " << num(sl.tokens, 0) << " | " << num(sl.loss) << " | " << num(sl.lower) << " to "
      << num(sl.upper) << " | " << (sl.key == s.worst_slice ? "worst " : "") << (flagged ? "worse than the mean" : "")
      << " |\n";
  }
  m << "\n## Calibration\n\n";
  if (!svg.empty()) m << "![reliability diagram](" << svg << ")\n\n";
  m << "| confidence bin | positions | mean confidence | accuracy |\n|---|---|---|---|\n";
  for (const auto& b : cal.reliability)
    m << "| " << num(b.lower, 3) << " to " << num(b.upper, 3) << " | " << num(double(b.count), 0) << " | "
      << num(b.mean_confidence) << " | " << num(b.accuracy) << " |\n";
  return m.str();
}

std::string decision_text(const ReleaseRecord& r) {
  std::ostringstream t;
  t << "decision: " << (r.promote ? "PROMOTE" : "REJECT") << " " << r.artifact.folder << " against baseline "
    << r.baseline.name << " (policy " << r.policy.version << ", rubric score " << num(r.rubric.score, 2) << ")\n";
  for (const auto& reason : r.reasons) t << "  reason: " << reason << "\n";
  if (r.utility) t << utility_lines(*r.utility);
  if (r.costs)
    t << r.costs->text();
  else
    t << "  costs: none (no cost table in the run folder; the pipeline tool's costs stage writes RUN/costs.json)\n";
  t << "  in service: " << r.in_service.name << (r.in_service.checkpoint ? " (" + *r.in_service.checkpoint + ")" : std::string())
    << "\n";
  if (r.review.required)
    t << "  review: a person signs this promotion off (" << r.review.minutes << " minutes, the policy's review), "
      << (r.review.pending ? "pending" : "done") << "\n";
  if (!r.record_path.empty()) t << "  record: " << r.record_path << "\n";
  return t.str();
}

}  // namespace shardtrain
