// The samples of one Prometheus scrape, built as gauges: what a prometheus::Collectable's
// Collect() returns (the trainer's live metrics, the launcher's). Each series carries the
// collectable's common labels (job, run folder, host, ...) followed by its own (section, ...);
// samples of one name go to one family, in the order they were added.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

namespace shardtrain {

class GaugeFamilies {
 public:
  using Labels = std::map<std::string, std::string>;
  explicit GaugeFamilies(Labels common) : common_(std::move(common)) {}
  // One sample of gauge `name` (its HELP text is the first call's) with the common labels and `own`.
  void gauge(const std::string& name, const std::string& help, double value, const Labels& own = {});
  std::vector<prometheus::MetricFamily> take() { return std::move(families_); }

 private:
  Labels common_;
  std::vector<prometheus::MetricFamily> families_;
};

}  // namespace shardtrain
