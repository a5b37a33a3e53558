// scale-bench run and scale-bench report (scale_bench.hpp): options, then one call into libcore
// (bench/scale_launch.hpp, scaling/report.hpp). Neither needs MPI in this process: `run`
// starts its jobs under mpirun as child processes.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "shardtrain/scaling/report.hpp"
#include "shardtrain/tool/scale_bench.hpp"
#include "shardtrain/bench/scale_launch.hpp"
#include "model_option.hpp"

namespace shardtrain::scale_bench {

Subcommand add_run_command(CLI::App& parent) {
  struct Args {
    std::string workers, refused_model;
    ScaleRunOptions options;
  };
  auto args = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand(
      "run", "Train at each W of --workers (mpirun -np W BIN_DIR/<tool> TRAIN-ARGS --run-dir OUT/w<W>), then report.");
  c.app->add_option("--workers", args->workers, "World sizes, comma-separated (e.g. 1,2,4)")->required();
  c.app->add_flag("--strong", args->options.strong,
                  "Strong scaling: one global batch for all W (default: weak, --global-batch x W / first W)");
  c.app->add_option("--tool", args->options.tool, "Training tool beside scale-bench")
      ->check(CLI::IsMember({"ddp-train", "fsdp-train"}))
      ->capture_default_str();
  c.app->add_option("--out", args->options.out_dir, "Folder of the run folders w<W>, their logs and the report")
      ->capture_default_str();
  c.app->add_option("--step-model", args->options.model_path,
                    "Step model file of 'scale-bench fit' for the predicted column (see report)");
  c.app->add_option("train-args", args->options.train_args,
                    "After --: the training tool's options (no --run-dir), the shape among them (--model gpt2-small)");
  add_refused_model_option(c.app, args->refused_model);
  CLI::App* app = c.app;
  c.run = [args, app] {
    refuse_model_option(*app, args->refused_model, "scale-bench run",
                        "the shape is the training tool's: give it after -- (scale-bench run ... -- --model NAME ...); "
                        "the step model file is --step-model FILE");
    args->options.workers = parse_workers(args->workers);
    run_scaling_series(args->options);
    std::cout << "scale-bench run: report in " << args->options.out_dir << "/report.md" << std::endl;
    return 0;
  };
  return c;
}

Subcommand add_report_command(CLI::App& parent) {
  struct Args {
    std::vector<std::string> run_dirs;
    std::string refused_model;
    ScalingReportOptions options;
  };
  auto args = std::make_shared<Args>();
  Subcommand c;
  c.app = parent.add_subcommand("report", "Scaling report of run folders: report.json, report.md, SVG plots.");
  c.app->add_option("run-dirs", args->run_dirs, "Run folders (each with summary.json), one per W")->required();
  c.app->add_option("--out", args->options.out_dir, "Output folder")->capture_default_str();
  c.app->add_option("--step-model", args->options.model_path, "Step model file of 'scale-bench fit' for the predicted column");
  add_refused_model_option(c.app, args->refused_model);
  CLI::App* app = c.app;
  c.run = [args, app] {
    refuse_model_option(*app, args->refused_model, "scale-bench report",
                        "a report takes each run's shape from its summary; the step model file is --step-model FILE");
    const ScalingReport report = write_scaling_report(args->run_dirs, args->options);
    if (!args->options.model_path.empty()) std::cerr << "scale-bench report: " << report.prediction_note << std::endl;
    if (report.has_base) std::cout << report.formula << "\n";
    else std::cout << "no W=1 run: speedup and E(W) not computed\n";
    std::cout << "scale-bench report: " << args->options.out_dir << "/report.md" << std::endl;
    return 0;
  };
  return c;
}

}  // namespace shardtrain::scale_bench
