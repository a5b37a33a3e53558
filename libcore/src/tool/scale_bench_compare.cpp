// scale-bench compare (scale_bench.hpp): a benchmark declared as data (bench/specs/*.json),
// options then one call into libcore (bench/bench_runner.hpp, bench/bench_figures.hpp). No MPI in
// this process: the variants' commands start their own mpirun.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/bench/bench_runner.hpp"
#include "shardtrain/tool/scale_bench.hpp"

namespace shardtrain::scale_bench {

Subcommand add_compare_command(CLI::App& parent) {
  struct Args {
    std::string spec_path, json_path;
    std::vector<std::string> settings;
    int rounds = 0;
    bool dry_run = false, reread = false;
    bench::CompareOptions options;
  };
  auto args = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand(
      "compare",
      "Run a benchmark declared in a spec (bench/specs/NAME.json): its variants side by side in rounds, one\n"
      "row per round and variant, the medians, ratios to a baseline variant, checks and #wrong (exit 1 when\n"
      "a value is wrong)");
  c.app->add_option("spec", args->spec_path, "The benchmark spec (JSON; format in scale-bench(1))")->required();
  c.app->add_option("--set", args->settings, "KEY=VALUE: an option of the spec (e.g. model=gpt2-small), repeatable")
      ->allow_extra_args(false);  // one KEY=VALUE per --set: `--set a=b SPEC` leaves SPEC the spec
  c.app->add_option("--rounds", args->rounds, "Rounds instead of the spec's (1 to 1000)")->check(CLI::Range(1, 1000));
  c.app->add_option("--bin", args->options.bin_dir, "The tools' folder {bin} (default: this program's folder)");
  c.app->add_option("--data", args->options.data_dir, "The data folder {data}")->capture_default_str();
  c.app->add_option("--work", args->options.work_dir,
                    "Keep the runs in this empty folder {work} (default: a temporary folder, removed after);\n"
                    "with --reread, the folder to read them from");
  c.app->add_option("--json", args->json_path, "Also write the figures as JSON to FILE ('-': to stdout, no table)");
  c.app->add_flag("--dry-run", args->dry_run, "Check the spec and print the commands of the setup and round 1; run nothing");
  c.app->add_flag("--reread", args->reread,
                  "Run nothing: the figures again from the runs an earlier compare left in --work DIR (after a\n"
                  "change of the spec's readings, ratios or checks)");
  c.run = [args] {
    bench::BenchSpec spec = bench::read_bench_spec(args->spec_path);
    for (const auto& s : args->settings) bench::apply_setting(spec, s);
    if (args->rounds > 0) spec.rounds = args->rounds;
    if (args->dry_run) {
      std::cout << bench::planned_commands(spec, args->options);
      return 0;
    }
    args->options.on_row = [](const bench::RunRow& row, double wall_s) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.2f", wall_s);
      std::cerr << "scale-bench compare: round " << row.round << " " << row.variant << " ran " << seconds << " s" << std::endl;
    };
    const auto rows = args->reread ? bench::reread_benchmark(spec, args->options) : bench::run_benchmark(spec, args->options);
    const auto figures = bench::compute_figures(spec, rows);
    if (args->json_path == "-") {
      std::cout << bench::figures_json(spec, figures).dump(2) << std::endl;
    } else {
      std::cout << bench::format_table(spec, figures) << std::flush;
      if (!args->json_path.empty()) write_json_file(args->json_path, bench::figures_json(spec, figures));
    }
    return figures.wrong > 0 ? 1 : 0;  // a wrong value is a failure verdict, as in `collectives`
  };
  return c;
}

}  // namespace shardtrain::scale_bench
