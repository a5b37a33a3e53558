// equiv-check: compare two step logs (loss per step), two parameter files (HDF5 float datasets) or
// two checkpoints (every logical tensor: parameters and optimizer moments, any layout) and print a table and a verdict: BITWISE, WITHIN tolerance or DIFFERENT. Options + one call into
// libcore (equiv.hpp). See equiv-check(1).
#include <cstdio>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "shardtrain/equiv/equivalence.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace eq = shardtrain::equiv;
  CLI::App app{"Compare two step logs (.jsonl: loss per step), two parameter files (.h5: float datasets by\n"
               "name) or two checkpoints (a step_<N> folder, or a checkpoint folder whose `latest` names one:\n"
               "every logical tensor, parameters and optimizer moments, whatever layout wrote them): per tensor\n"
               "max abs/rel difference and max ULP distance; verdict BITWISE, WITHIN tolerance or DIFFERENT.\n"
               "Exit 0 BITWISE/WITHIN, 1 DIFFERENT, 2 unusable input.",
               "equiv-check"};
  eq::EquivOptions o;
  std::string kind = "auto", group, group_a, group_b, json_path;
  bool quiet = false;
  app.add_option("A", o.a, "Candidate: step log (.jsonl), parameter file (.h5/.hdf5) or checkpoint folder")->required();
  app.add_option("B", o.b, "Reference, same kind as A")->required();
  app.add_option("--kind", kind, "Input kind: auto (a folder: checkpoint; else by extension), steps, params or checkpoint")
      ->check(CLI::IsMember({"auto", "steps", "params", "checkpoint"}))
      ->capture_default_str();
  app.add_option("--group", group, "params: compare the float datasets under this HDF5 group in both files "
                                   "(default: the whole file)");
  app.add_option("--group-a", group_a, "params: group in A (overrides --group)");
  app.add_option("--group-b", group_b, "params: group in B (overrides --group)");
  app.add_option("--rtol", o.tolerance.rtol, "Relative tolerance: |a-b| <= atol + rtol*|b|")->capture_default_str();
  app.add_option("--atol", o.tolerance.atol, "Absolute tolerance")->capture_default_str();
  app.add_option("--ulps", o.tolerance.ulps, "Accept elements at most this many ULPs apart")->capture_default_str();
  app.add_option("--json", json_path, "Also write the report as JSON to FILE ('-': standard output; the table "
                                      "then goes to standard error)");
  app.add_flag("-q,--quiet", quiet, "Print only the verdict line");
  shardtrain::add_version_flag(app);

  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    o.kind = kind == "steps"        ? eq::InputKind::kStepLog
             : kind == "params"     ? eq::InputKind::kParams
             : kind == "checkpoint" ? eq::InputKind::kCheckpoint
                                    : eq::InputKind::kAuto;
    if (o.kind == eq::InputKind::kCheckpoint && (app.count("--group") || app.count("--group-a") || app.count("--group-b")))
      throw shardtrain::UsageError("--group, --group-a and --group-b select datasets of parameter files; a checkpoint "
                                   "is compared whole");
    o.group_a = app.count("--group-a") ? group_a : group;
    o.group_b = app.count("--group-b") ? group_b : group;
    const eq::EquivReport report = eq::compare_files(o);
    std::string text = report.table();
    if (quiet) text = text.substr(text.rfind("verdict:"));
    if (json_path == "-") {
      std::fputs(text.c_str(), stderr);
      std::cout << report.to_json().dump(2) << std::endl;
    } else {
      std::fputs(text.c_str(), stdout);
      if (!json_path.empty()) shardtrain::write_json_file(json_path, report.to_json());
    }
    return eq::exit_code(report.verdict);
  });
}
