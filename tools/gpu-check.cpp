// gpu-check: the device proof (issue 15) in stages, each under its own time limit within a part's
// budget, writing OUT/gpu-check/<stage>.json, <stage>.log and summary.json. Options + one call
// into libcore (deviceproof/gpu_check.hpp). See gpu-check(1).
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "shardtrain/deviceproof/gpu_check.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace deviceproof = shardtrain::deviceproof;
  CLI::App app{"The device proof: env, build, data, gpu_tests, cpu_gpu_equivalence, shared_gpu_2rank,\n"
               "deterministic_bitwise, resume_cross_device (part 1); env, data, bf16_vs_fp32, gpt2_124m, cpu_scaling\n"
               "(part 2). Each stage runs under its own time limit; one whose limit no longer fits the part's budget\n"
               "(PART_BUDGET_S) is skipped. Results: OUT/gpu-check/<stage>.json, <stage>.log, summary.json. From the\n"
               "device bundle nothing is built: the build stage checks the bundle. Environment: OUT, BUILD_DIR,\n"
               "PART_BUDGET_S, GPT2_MICRO_BATCH, JOBS, FORTUNES. Exit 0 every stage run passed (skipped ones do not\n"
               "fail); 1 otherwise; 2 a usage error; 143 stopped by SIGTERM or SIGINT.",
               "gpu-check"};
  deviceproof::GpuCheckOptions o;
  app.add_option("--part", o.part, "1, 2 or all")->capture_default_str();
  app.add_option("--only", o.only, "Run only these stages (comma-separated), whatever their part");
  app.add_flag("--dry-run", o.dry_run,
               "No device needed: every stage on the CPU with tiny sizes, using an existing build (BUILD_DIR, "
               "default: the build holding this program); GPU stages check that [gpu] tests skip (exit 77)");
  app.add_flag("--list", o.list, "Print the plan (stages, parts, limits, what each runs) and exit");
  shardtrain::add_version_flag(app);
  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    o.exe_dir = std::filesystem::canonical("/proc/self/exe").parent_path().string();
    return deviceproof::run_gpu_check(o);
  });
}
