// Fuzz target: a release registry's last-known-good pointer, through LastKnownGood::from_json on JsonFile::parse.
#include "fuzz_target.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/decision/registry.hpp"

SHARDTRAIN_FUZZ_TARGET(registry_pointer) {
  using namespace shardtrain;
  const std::string path = "registry/last-known-good";
  fuzz::expect_reader_contract(path, [&] {
    (void)LastKnownGood::from_json(JsonFile::parse(std::string(fuzz::as_text(data, size)), path, "the last-known-good pointer"));
  });
}
