// hang-diagnose: read the flight records of a job's ranks and say which collective blocked first,
// which ranks never joined it, what they were doing instead and which rank is to blame. Options +
// one call into libcore (report/hang_diagnosis.hpp). See hang-diagnose(1).
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "shardtrain/report/flight_dump.hpp"
#include "shardtrain/report/hang_diagnosis.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace hang = shardtrain::hang;
  CLI::App app{"Diagnose a hung or failed job from its flight records (flight.rank*.json): the first collective\n"
               "not completed by every member, the ranks that never joined it and what they did instead, and the\n"
               "culprit. Exit 0 no hang, 1 hang/mismatch/error exit diagnosed (also ambiguous), 2 unusable input.",
               "hang-diagnose"};
  std::vector<std::string> inputs;
  hang::DiagnosisOptions options;
  int world_size = 0;
  bool json_output = false;
  app.add_option("INPUT", inputs, "A run directory (every flight.rank*.json in it) or dump files")->required();
  app.add_flag("--json", json_output, "Print the diagnosis as JSON (format shardtrain-hang-diagnosis) instead of text");
  app.add_option("--world-size", world_size, "Ranks in the job (default: the dumps' world_size); ranks without a "
                                             "dump are reported missing")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-wait", options.min_wait_s, "Snapshots only (every dump's reason signal or requested): a "
                                                   "collective a peer has not joined is a hang after SECONDS")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  shardtrain::add_version_flag(app);

  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    const hang::Diagnosis diagnosis = hang::diagnose(hang::load_flight_dumps(inputs, world_size), options);
    if (json_output) std::cout << diagnosis.to_json().dump(2) << std::endl;
    else std::cout << diagnosis.text();
    return diagnosis.exit_code();
  });
}
