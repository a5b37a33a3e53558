// The device bundle's manifest (deviceproof/bundle_manifest.hpp): written for a small staged
// folder made here (files of both modes, a symbolic link, the device library list), read back by
// the reader gpu-check's build stage uses, an altered file named, and bad input refused with exit 2.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/deviceproof/bundle_manifest.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::deviceproof;
namespace fs = std::filesystem;

namespace {

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A staged bundle as device-bundle.sh leaves it before step 5, a build's cache, the dropped list
// and a stand-in nvcc; returns the writer's inputs.
BundleSources staged(const std::string& dir) {
  BundleSources s{dir + "/bundle", dir + "/build", dir + "/src", dir + "/dropped.txt", dir + "/nvcc", "/x/libcudart.so.13.0.1"};
  write_text(s.bundle + "/bin/orterun", "#!/bin/sh\n");
  fs::permissions(s.bundle + "/bin/orterun", fs::perms(0755));
  fs::create_symlink("orterun", s.bundle + "/bin/mpirun");
  write_text(s.bundle + "/data/fortunes.h5", "corpus");
  fs::permissions(s.bundle + "/data/fortunes.h5", fs::perms(0644));
  write_text(s.bundle + "/lib/device-libs.txt", "libcublas.so.13\nlibnccl.so.2\n");
  write_text(s.build + "/CMakeCache.txt", "# cache\nCMAKE_BUILD_TYPE:STRING=Release\nSHARDTRAIN_NATIVE:BOOL=ON\n");
  fs::create_directories(s.source);
  write_text(s.dropped_file, "mca_btl_uct mca_mtl_psm2\n");
  write_text(s.nvcc, "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Build cuda_13.0.r13.0'\n");
  fs::permissions(s.nvcc, fs::perms(0755));
  return s;
}

}  // namespace

TEST_CASE("bundle manifest: written for a staged folder, read back by gpu-check's reader, an altered file named",
          "[unit][gpu_check]") {
  const auto s = staged(test::temp_dir("bundle_manifest"));
  write_bundle_manifest(s.bundle, bundle_manifest_of(s));
  const auto j = nlohmann::json::parse(std::ifstream(s.bundle + "/manifest.json"));
  CHECK(j["format"] == "shardtrain-gpu-bundle");
  CHECK(j["format_version"] == 1);
  CHECK(j["build"]["type"] == "Release");
  CHECK(j["build"]["native"] == "ON");
  CHECK(j["build"]["nvcc"] == nlohmann::json{"Build cuda_13.0.r13.0"});
  CHECK(j["compiled_paths"]["source"] == s.source);
  CHECK(j["versions"]["cuda_runtime_bundled"] == "libcudart.so.13.0.1");
  CHECK(j["provided_by_device"] == nlohmann::json{"libcublas.so.13", "libnccl.so.2"});
  CHECK(j["openmpi_components_left_out"] == nlohmann::json{"mca_btl_uct", "mca_mtl_psm2"});
  CHECK(j["code_version"] == "unknown");  // the source folder is no git tree

  // Every file and link but the manifest, sorted by path, as the format has it.
  const auto m = read_bundle_manifest(s.bundle + "/manifest.json");
  CHECK(m.compiled_testdata == s.source + "/testdata");
  CHECK(m.compiled_bin == s.build + "/bin");
  REQUIRE(m.files.size() == 4);
  CHECK(m.files[0].path == "bin/mpirun");
  CHECK(m.files[0].is_link());
  CHECK(m.files[0].link == "orterun");
  CHECK(m.files[1].path == "bin/orterun");
  CHECK(m.files[1].mode == "755");
  CHECK(m.files[2].path == "data/fortunes.h5");
  CHECK(m.files[2].mode == "644");
  CHECK(m.files[2].bytes == 6);
  CHECK(m.files[2].sha256 == to_hex(sha256("corpus", 6)));
  CHECK(m.files[3].path == "lib/device-libs.txt");
  CHECK(bundle_mismatches(s.bundle, m).empty());

  write_text(s.bundle + "/data/fortunes.h5", "corpuz");  // same size, other bytes
  CHECK(bundle_mismatches(s.bundle, m) == std::vector<std::string>{"data/fortunes.h5"});

  // Written again (a repack), the manifest does not list itself.
  write_bundle_manifest(s.bundle, bundle_manifest_of(s));
  CHECK(read_bundle_manifest(s.bundle + "/manifest.json").files.size() == 4);
}

TEST_CASE("bundle manifest: a missing folder or an unreadable input exits 2 naming it", "[unit][gpu_check]") {
  const std::string dir = test::temp_dir("bundle_manifest_bad");
  auto s = staged(dir);
  auto missing = s;
  missing.bundle = dir + "/nowhere";
  CHECK_THROWS_AS(bundle_manifest_of(missing), UsageError);
  CHECK_THROWS_WITH(bundle_manifest_of(missing), Catch::Contains(dir + "/nowhere"));
  auto no_dropped = s;
  no_dropped.dropped_file = dir + "/no-dropped.txt";
  CHECK_THROWS_WITH(bundle_manifest_of(no_dropped), Catch::Contains("no-dropped.txt") && Catch::Contains("--dropped"));
  auto no_cache = s;
  no_cache.build = dir + "/src";
  CHECK_THROWS_WITH(bundle_manifest_of(no_cache), Catch::Contains("CMakeCache.txt"));

  // The tool: exit 2 and one line naming the file.
  const auto r = run_child_captured({test::tool_path("gpu-check"), "manifest", s.bundle, "--build", s.build, "--source",
                                     s.source, "--dropped", dir + "/no-dropped.txt", "--nvcc", s.nvcc, "--cudart", s.cudart},
                                    true);
  CHECK(r.status == 2);
  CHECK(r.out.find("no-dropped.txt") != std::string::npos);
  // The proof's own options do not go with it.
  const auto misplaced = run_child_captured({test::tool_path("gpu-check"), "--dry-run", "manifest", s.bundle, "--build",
                                             s.build, "--source", s.source, "--dropped", s.dropped_file, "--nvcc", s.nvcc,
                                             "--cudart", s.cudart},
                                            true);
  CHECK(misplaced.status == 2);
  CHECK(misplaced.out.find("--dry-run") != std::string::npos);

  fs::remove(s.bundle + "/lib/device-libs.txt");
  CHECK_THROWS_WITH(bundle_manifest_of(s), Catch::Contains("device-libs.txt"));
  CHECK_FALSE(fs::exists(s.bundle + "/manifest.json"));
}
