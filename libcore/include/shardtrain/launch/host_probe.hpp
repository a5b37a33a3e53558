// Can the launcher still reach each node of the job? A partitioned node (its link down) looks,
// from the flight records alone, like any other hang: every rank of every node waits in the same
// collective until its timeout, the partitioned node's ranks included, and no record says which
// side of the cut is the broken one. The network can: a TCP connection to a port every node
// listens on is answered at once by a node that is up (accepted, or refused: either way its
// network answered) and not at all by a node cut off. Under Slurm that port is slurmd's
// (SlurmdPort): every compute node listens there, for the controller and for its peers.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::launch {

enum class Reachability { kReachable, kUnreachable, kUnknown };

struct HostProbe {
  std::string host;
  Reachability reach = Reachability::kUnknown;
  // Why: "connected", "refused" (up, nothing listening), "no answer within 1000 ms", "no route to
  // host", "unknown host" (the name did not resolve: unknown, not unreachable), ...
  std::string detail;
  double seconds = 0;  // from the start of the probe to its answer (or to the deadline)
};

// Connects to HOST:port for every host at once (non-blocking connects, one deadline for all), so
// probing N hosts takes the deadline at most, not N times it. Host names resolve through the
// system's resolver (IPv4). Never throws: a failure of the probe itself is kUnknown.
std::vector<HostProbe> probe_hosts(const std::vector<std::string>& hosts, int port, double timeout_s);

}  // namespace shardtrain::launch
