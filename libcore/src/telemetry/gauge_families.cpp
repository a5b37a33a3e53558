#include "shardtrain/telemetry/gauge_families.hpp"

namespace shardtrain {

void GaugeFamilies::gauge(const std::string& name, const std::string& help, double value, const Labels& own) {
  prometheus::MetricFamily* family = nullptr;
  for (auto& f : families_)
    if (f.name == name) family = &f;
  if (!family) family = &families_.emplace_back(prometheus::MetricFamily{name, help, prometheus::MetricType::Gauge, {}});
  prometheus::ClientMetric metric;
  for (const auto& [k, v] : common_) metric.label.push_back({k, v});
  for (const auto& [k, v] : own) metric.label.push_back({k, v});
  metric.gauge.value = value;
  family->metric.push_back(std::move(metric));
}

}  // namespace shardtrain
