// Network stragglers (network_straggler.hpp): per-step link rates from the step logs' per-peer
// figures, the host whose every link is slow named.
#include "shardtrain/telemetry/network_straggler.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"

namespace shardtrain {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One step's host rates: host -> (best link rate, bytes its links moved).
struct HostStep {
  double rate = 0;
  std::uint64_t bytes = 0;
};
std::map<std::string, HostStep> host_rates(const std::map<int, const RankLinkStep*>& ranks) {
  std::map<std::string, HostStep> hosts;
  for (const auto& [a, ra] : ranks)
    for (const auto& [b, ab] : ra->peers) {
      const auto other = ranks.find(b);
      if (other == ranks.end() || other->second->host == ra->host) continue;  // unknown host, or the same one
      const RankLinkStep& rb = *other->second;
      const auto ba = rb.peers.find(a);
      if (ba != rb.peers.end() && b < a) continue;  // the pair is counted once, from its lower rank
      double seconds = ab.seconds, bytes = double(ab.bytes);
      if (ba != rb.peers.end()) {
        seconds = std::min(ab.seconds, ba->second.seconds);
        bytes = 0.5 * double(ab.bytes + ba->second.bytes);
      }
      if (seconds <= 0 || bytes <= 0) continue;
      const double rate = bytes / seconds;
      for (const std::string* h : {&ra->host, &rb.host}) {
        HostStep& hs = hosts[*h];
        hs.rate = std::max(hs.rate, rate);
        hs.bytes += std::uint64_t(bytes);
      }
    }
  return hosts;
}

}  // namespace

void NetworkStragglerOptions::validate() const {
  if (!(ratio > 0 && ratio < 1)) throw UsageError("network straggler ratio must be in (0, 1), got " + std::to_string(ratio));
  if (consecutive < 1) throw UsageError("network straggler consecutive steps must be >= 1, got " + std::to_string(consecutive));
}

NetworkStragglerReport detect_network_stragglers(const std::vector<RankLinkStep>& steps, const NetworkStragglerOptions& options) {
  options.validate();
  NetworkStragglerReport report;
  report.options = options;
  std::map<std::int64_t, std::map<int, const RankLinkStep*>> by_step;
  std::map<std::string, std::set<int>> ranks_of_host;
  for (const RankLinkStep& s : steps) {
    by_step[s.step][s.rank] = &s;
    ranks_of_host[s.host].insert(s.rank);
  }
  struct Run {
    std::int64_t first = 0, last = -2;
    std::vector<double> rates, others;
  };
  std::map<std::string, Run> current, named;  // the current slow run of each host; the latest named one
  std::map<std::string, std::vector<double>> judged;
  for (const auto& [step, ranks] : by_step) {
    std::map<std::string, HostStep> hosts = host_rates(ranks);
    for (auto it = hosts.begin(); it != hosts.end();)
      it = it->second.bytes < options.min_bytes ? hosts.erase(it) : std::next(it);
    if (hosts.size() < 3) continue;
    ++report.steps_judged;
    std::vector<double> rates;
    for (const auto& [h, hs] : hosts) rates.push_back(hs.rate);
    const double mid = median(rates);
    for (const auto& [h, hs] : hosts) {
      judged[h].push_back(hs.rate);
      Run& run = current[h];
      if (hs.rate >= options.ratio * mid) {
        run = Run{};
        continue;
      }
      if (run.last != step - 1 || run.rates.empty()) run = Run{step, step, {}, {}};
      run.last = step;
      run.rates.push_back(hs.rate);
      std::vector<double> others;
      for (const auto& [o, os] : hosts)
        if (o != h) others.push_back(os.rate);
      run.others.push_back(median(others));
      if (int(run.rates.size()) >= options.consecutive) named[h] = run;
    }
  }
  for (const auto& [h, rates] : judged) report.hosts.push_back({h, median(rates), int(rates.size())});
  for (const auto& [h, run] : named) {
    NetworkStraggler s;
    s.host = h;
    s.ranks.assign(ranks_of_host[h].begin(), ranks_of_host[h].end());
    s.rate_Bps = median(run.rates);
    s.others_rate_Bps = median(run.others);
    s.first_step = run.first;
    s.slow_steps = int(run.rates.size());
    report.stragglers.push_back(s);
  }
  return report;
}

std::vector<RankLinkStep> read_run_link_steps(const std::string& run_dir) {
  std::vector<RankLinkStep> out;
  for (const auto& [rank, path] : find_step_logs(run_dir))
    for (const StepLogEntry& e : read_step_log(path).steps)
      if (!e.record.peers.empty()) out.push_back({rank, e.host, e.record.step, e.record.peers});
  return out;
}

std::string format_network_stragglers(const NetworkStragglerReport& report) {
  std::string out;
  for (const NetworkStraggler& s : report.stragglers) {
    std::string ranks;
    for (int r : s.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    char buf[256];
    std::snprintf(buf, sizeof buf, "host %s (ranks %s) %.3g MB/s against %.3g MB/s, %d steps from step %lld",
                  s.host.c_str(), ranks.c_str(), s.rate_Bps * 1e-6, s.others_rate_Bps * 1e-6, s.slow_steps,
                  (long long)s.first_step);
    out += (out.empty() ? "network stragglers: " : "; ") + std::string(buf);
  }
  return out;
}

}  // namespace shardtrain
