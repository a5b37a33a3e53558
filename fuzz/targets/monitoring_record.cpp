// Fuzz target: a release-gate monitor record (registry monitoring/*.json), through MonitoringRecord::from_json on JsonFile::parse.
#include "fuzz_target.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/decision/monitoring_record.hpp"

SHARDTRAIN_FUZZ_TARGET(monitoring_record) {
  using namespace shardtrain;
  const std::string path = "registry/monitoring/0001.json";
  fuzz::expect_reader_contract(path, [&] {
    (void)MonitoringRecord::from_json(JsonFile::parse(std::string(fuzz::as_text(data, size)), path, "the monitoring record"));
  });
}
