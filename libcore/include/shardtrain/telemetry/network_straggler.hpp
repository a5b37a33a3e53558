// Network stragglers: a host whose links carry far less than the others' (a slow or shaped link,
// a bad cable, a congested switch port), told apart from a slow computation (straggler.hpp scores
// the sections of the step; a slow link shows there only as everybody's exposed communication).
// Pure computation over the step log's per-peer figures (step_log.hpp StepRecord::peers: bytes
// received from each peer and the seconds of the exchanges with it, per step).
//
// Per step:
//   link rate of a pair of ranks on different hosts = the bytes each received from the other
//     (their mean) / the LOWER of the two ends' seconds. Each end's seconds include its wait for a
//     late peer; the end that came later waited for nobody, so the lower figure is the transfer's
//     (a rank slowed by a slow link elsewhere makes its next partners wait, and would otherwise
//     make their healthy links look slow). One end's figures alone are used when the other's are
//     missing. Pairs on one host are not links of the network and are left out.
//   host rate = the best (highest) rate of the host's links: a host is slow when every link it
//     has is slow, while a healthy host paired with the slow one still has a fast link.
//   A host is slow at a step when its rate is below `ratio` x the median host rate of that step.
//     Telling which end of a link is slow needs a third host: with fewer than 3 hosts with links
//     in a step, nothing is judged there.
// A host is named a network straggler once slow for `consecutive` steps in a row; its figure is
// the median of its rates over its latest run of slow steps, and the others' median rate over the
// same steps. Steps where a host moved fewer than `min_bytes` over its links are not judged for it
// (a step with a few bytes says nothing about the link rate).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain {

struct NetworkStragglerOptions {
  double ratio = 0.25;         // slow: below this share of the median host rate; in (0, 1)
  int consecutive = 3;         // slow steps in a row to be named; >= 1
  std::uint64_t min_bytes = 65536;  // bytes a host's links must move in a step to be judged there
  // UsageError naming the bad field.
  void validate() const;
  static auto fields() {
    using namespace json_fields;
    using O = NetworkStragglerOptions;
    return std::tuple{key("ratio", &O::ratio), key("consecutive", &O::consecutive), key("min_bytes", &O::min_bytes)};
  }
  bool operator==(const NetworkStragglerOptions&) const = default;
};

// One rank's step, as the detection reads it.
struct RankLinkStep {
  int rank = 0;
  std::string host;
  std::int64_t step = 0;
  std::map<int, PeerTransfer> peers;  // by peer world rank
};

struct NetworkStraggler {
  std::string host;
  std::vector<int> ranks;           // the host's ranks seen in the figures
  double rate_Bps = 0;              // median rate of its links over its latest slow run (bytes/s)
  double others_rate_Bps = 0;       // the other hosts' median rate over the same steps (bytes/s)
  std::int64_t first_step = 0;      // the latest slow run's first step
  int slow_steps = 0;               // its length
  static auto fields() {
    using namespace json_fields;
    using S = NetworkStraggler;
    return std::tuple{key("host", &S::host), key("ranks", &S::ranks, json_fields::ranks),
                      key("rate_MBps", &S::rate_Bps, scaled(1e-6, 1e6)),
                      key("others_rate_MBps", &S::others_rate_Bps, scaled(1e-6, 1e6)), key("first_step", &S::first_step),
                      key("slow_steps", &S::slow_steps)};
  }
  bool operator==(const NetworkStraggler&) const = default;
};

// One host's figures over the run.
struct HostLinkRate {
  std::string host;
  double median_rate_Bps = 0;  // median over the steps where it was judged
  int steps = 0;               // steps where it was judged
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("host", &HostLinkRate::host), key("median_rate_MBps", &HostLinkRate::median_rate_Bps, scaled(1e-6, 1e6)),
                      key("steps", &HostLinkRate::steps)};
  }
  bool operator==(const HostLinkRate&) const = default;
};

// JSON (the run summary's "network_stragglers"; docs/FORMATS.md): the options' keys, then
// "steps_judged", "hosts" and "stragglers" (the fields() lists); rates in MB/s (10^6 bytes per second).
struct NetworkStragglerReport {
  NetworkStragglerOptions options;
  int steps_judged = 0;                   // steps with 3 or more hosts with links
  std::vector<HostLinkRate> hosts;        // sorted by host name
  std::vector<NetworkStraggler> stragglers;  // sorted by host name
  static auto fields() {
    using namespace json_fields;
    using R = NetworkStragglerReport;
    return std::tuple{inlined(&R::options), key("steps_judged", &R::steps_judged), key("hosts", &R::hosts),
                      key("stragglers", &R::stragglers)};
  }
  bool operator==(const NetworkStragglerReport&) const = default;
};

NetworkStragglerReport detect_network_stragglers(const std::vector<RankLinkStep>& steps,
                                                 const NetworkStragglerOptions& options = {});

// The figures of a run folder's step logs (find_step_logs, read_step_log: the last record of a
// step wins), for detect_network_stragglers. Throws as read_step_log does.
std::vector<RankLinkStep> read_run_link_steps(const std::string& run_dir);

// "network stragglers: host node3 (ranks 2) 2.4 MB/s against 48.1 MB/s, 5 steps from step 310";
// "" when none is named.
std::string format_network_stragglers(const NetworkStragglerReport& report);

}  // namespace shardtrain
