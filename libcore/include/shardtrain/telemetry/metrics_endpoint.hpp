// A rank's Prometheus pull endpoint (--metrics-port): prometheus-cpp's Exposer bound to ADDR:PORT,
// serving one collectable at /metrics from the library's own HTTP threads, so a scrape is
// answered while the rank's step loop is blocked (in a collective, a save, a hang). The
// collectable is asked for its samples at each scrape (prometheus::Collectable::Collect), so
// values computed then (the age of a collective in flight) are current to the scrape.
#pragma once
#include <memory>
#include <string>

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace shardtrain {

class MetricsEndpoint {
 public:
  // Binds `bind`:`port` (an IPv4 address or host name; port 1..65535) and serves `collectable`
  // at /metrics until destroyed (the exposer holds it weakly: its owner keeps it alive). Throws
  // UsageError naming the address when it cannot bind (the port is in use, the address is not
  // this host's), so a job fails at start, never mid-run.
  MetricsEndpoint(const std::string& bind, int port, std::weak_ptr<prometheus::Collectable> collectable);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  const std::string& address() const { return address_; }  // "bind:port"

 private:
  std::string address_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace shardtrain
