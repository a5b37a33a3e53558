// hang-diagnose: read the flight records of a job's ranks and say which collective blocked first,
// which ranks never joined it, what they were doing instead and which rank is to blame. Options +
// one call into libcore (diagnose/hang_diagnosis.hpp). See hang-diagnose(1).
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/diagnose/flight_dump.hpp"
#include "shardtrain/diagnose/hang_diagnosis.hpp"
#include "shardtrain/telemetry/straggler.hpp"
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
  bool stragglers = false;
  shardtrain::StragglerOptions straggler_options;
  app.add_flag("--stragglers", stragglers,
               "Instead: the straggler scores of the run directory's step logs (steps.rank*.jsonl; a running job "
               "too). Exit 0 none named, 1 stragglers named");
  app.add_option("--threshold", straggler_options.threshold, "--stragglers: a score below it names a straggler, in (0, 1]")
      ->capture_default_str();
  app.add_option("--window", straggler_options.window, "--stragglers: steps per window of the individual score (>= 2)")
      ->capture_default_str();
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
    if (stragglers) {
      if (inputs.size() != 1) throw shardtrain::UsageError("--stragglers takes one run directory");
      straggler_options.validate();
      const auto report = shardtrain::straggler_report_from_run_dir(inputs[0], straggler_options);
      if (json_output) std::cout << report.to_json().dump(2) << std::endl;
      else std::cout << shardtrain::format_straggler_table(report);
      return report.stragglers.empty() ? 0 : 1;
    }
    const hang::Diagnosis diagnosis = hang::diagnose(hang::load_flight_dumps(inputs, world_size), options);
    if (json_output) std::cout << diagnosis.to_json().dump(2) << std::endl;
    else std::cout << diagnosis.text();
    return diagnosis.exit_code();
  });
}
