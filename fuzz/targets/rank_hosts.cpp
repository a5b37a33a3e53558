// Fuzz target: a run's hosts.json (rank -> host), through read_rank_hosts, then the host map.
#include "fuzz_target.hpp"
#include "shardtrain/telemetry/rank_hosts.hpp"

SHARDTRAIN_FUZZ_TARGET(rank_hosts) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("run/hosts.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { (void)read_rank_hosts(fuzz::scratch_dir() + "/run").ranks_by_host(); });
}
