// Fuzz target: a rank's flight record (hang-diagnose's input), through hang::read_flight_dump.
#include "fuzz_target.hpp"
#include "shardtrain/diagnose/flight_dump.hpp"

SHARDTRAIN_FUZZ_TARGET(flight_record) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("flight.rank0.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { hang::read_flight_dump(path); });
}
