// Fuzz target: a release registry's record (records/*.json), through ReleaseRecord::from_json on JsonFile::parse, the registry's reader.
#include "fuzz_target.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/decision/record.hpp"

SHARDTRAIN_FUZZ_TARGET(release_record) {
  using namespace shardtrain;
  const std::string path = "registry/records/0001-candidate.json";
  fuzz::expect_reader_contract(path, [&] {
    (void)ReleaseRecord::from_json(JsonFile::parse(std::string(fuzz::as_text(data, size)), path, "the release record"));
  });
}
