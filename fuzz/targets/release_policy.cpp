// Fuzz target: the release policy (release-gate --policy), through read_release_policy.
#include "fuzz_target.hpp"
#include "shardtrain/decision/policy.hpp"

SHARDTRAIN_FUZZ_TARGET(release_policy) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("release-policy.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { read_release_policy(path); });
}
