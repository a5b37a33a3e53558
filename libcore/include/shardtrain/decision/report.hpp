// Human-readable views of a release evaluation (releaseeval/checkpoint_evaluation.hpp) and of a release
// record (decision/record.hpp): the Markdown summary, the reliability diagram (gnuplot, as the
// scaling report draws its plots) and the lines `release-gate decide` prints.
#pragma once
#include <string>

#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"
#include "shardtrain/decision/record.hpp"

namespace shardtrain {

// reliability.svg in `out_dir` (with reliability.dat and reliability.gp beside it): per confidence
// bin the accuracy (bars at the bin's mean confidence) against the diagonal of perfect calibration,
// the ECE in the title. Returns the SVG's file name. Throws like draw_gnuplot.
std::string write_reliability_plot(const CheckpointEvaluation& evaluation, const std::string& out_dir);

// The Markdown summary: overall loss/perplexity with interval, accuracy, calibration (ECE, Brier,
// the reliability table and the diagram `svg`), slices (worst and flagged marked), latency,
// evaluated tokens/s, and the training run's throughput and E(W).
std::string evaluation_markdown(const CheckpointEvaluation& evaluation, const std::string& svg);

// The decision in a few lines: "decision: PROMOTE|REJECT ...", each failed check's reason, the
// fallback in service and the record's path.
std::string decision_text(const ReleaseRecord& record);

}  // namespace shardtrain
