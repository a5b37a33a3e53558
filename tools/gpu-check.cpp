// gpu-check: the device proof (issue 15) in stages, each under its own time limit within a part's
// budget, writing OUT/gpu-check/<stage>.json, <stage>.log and summary.json. Options + one call
// into libcore (deviceproof/gpu_check.hpp). `gpu-check manifest`: the device bundle's manifest.json,
// for scripts/device-bundle.sh (deviceproof/bundle_manifest.hpp). See gpu-check(1).
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/deviceproof/bundle_manifest.hpp"
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
               "fail); 1 otherwise; 2 a usage error; 143 stopped by SIGTERM or SIGINT. `gpu-check manifest --help`: the\n"
               "device bundle's manifest.",
               "gpu-check"};
  deviceproof::GpuCheckOptions o;
  app.add_option("--part", o.part, "1, 2 or all")->capture_default_str();
  app.add_option("--only", o.only, "Run only these stages (comma-separated), whatever their part");
  app.add_flag("--dry-run", o.dry_run,
               "No device needed: every stage on the CPU with tiny sizes, using an existing build (BUILD_DIR, "
               "default: the build holding this program); GPU stages check that [gpu] tests skip (exit 77)");
  app.add_flag("--list", o.list, "Print the plan (stages, parts, limits, what each runs) and exit");
  shardtrain::add_version_flag(app);

  // The bundle's manifest: written where the bundle is packed, read here by the build stage on the
  // device, so the format's writer and reader are one module (a subcommand: the proof keeps its
  // command line, which BUNDLE/gpu-check.sh passes on).
  CLI::App* manifest = app.add_subcommand(
      "manifest", "Write BUNDLE/manifest.json for a staged device bundle (what scripts/device-bundle.sh runs)");
  manifest->footer(
      "Lists every file and link of BUNDLE but the manifest with its SHA-256 and mode, beside the build's type and\n"
      "compilers, this machine's OS, glibc and vector extensions, the Debian versions of what the bundle holds, the\n"
      "paths compiled into shardtrain_tests and BUNDLE/lib/device-libs.txt (docs/FORMATS.md \"Device bundle\n"
      "manifest\"). Exit 0 written; 2 a missing folder or an unreadable input, named; 3 it could not be written.");
  deviceproof::BundleSources m;
  manifest->add_option("bundle", m.bundle, "The staged bundle folder (shardtrain-gpu-bundle/)")->required();
  manifest->add_option("--build", m.build, "The build it was packed from (its CMakeCache.txt; BUILD/bin is compiled in)")
      ->required();
  manifest->add_option("--source", m.source, "The source tree (git describe; SOURCE/testdata is compiled in)")->required();
  manifest->add_option("--dropped", m.dropped_file, "A file of the Open MPI components left out, separated by white space")
      ->required();
  manifest->add_option("--nvcc", m.nvcc, "The CUDA compiler the build used (its --version is recorded)")->required();
  manifest->add_option("--cudart", m.cudart, "The bundled CUDA runtime library (its file name is recorded)")->required();

  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    if (manifest->parsed()) {
      for (const CLI::Option* opt : app.get_options())
        if (opt->count() > 0 && opt->get_name() != "--help")
          throw shardtrain::UsageError(opt->get_name() + " is an option of the proof, not of 'manifest' (see gpu-check manifest --help)");
      deviceproof::write_bundle_manifest(m.bundle, deviceproof::bundle_manifest_of(m));
      return 0;
    }
    o.exe_dir = std::filesystem::canonical("/proc/self/exe").parent_path().string();
    return deviceproof::run_gpu_check(o);
  });
}
