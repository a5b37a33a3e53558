// The device bundle's manifest.json (docs/FORMATS.md "Device bundle manifest"): its one writer
// (`gpu-check manifest`, run by scripts/device-bundle.sh on the staged bundle) and its one reader
// (gpu-check's build stage, on the device, before any other stage runs).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"

namespace shardtrain::deviceproof {

// One entry of `files`: a file has bytes, sha256 and mode ("755" when executable, else "644"); a
// symbolic link has its target (link, never empty) and nothing else.
struct BundleFile {
  std::string path, sha256, link;
  std::uint64_t bytes = 0;
  std::string mode;
  bool is_link() const { return !link.empty(); }
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("path", &BundleFile::path), when(&BundleFile::is_link, key("link", &BundleFile::link)),
                      when([](const BundleFile& f) { return !f.is_link(); }, key("sha256", &BundleFile::sha256),
                           key("bytes", &BundleFile::bytes), key("mode", &BundleFile::mode))};
  }
  // A file entry needs its sha256, a link its target.
  void validate(const JsonFile& f, const std::string& at) const;
};

// What the packing machine recorded beside the files (gpu-check reads it back and needs none of it).
struct BundleBuildInfo {
  std::optional<std::string> type, native;  // CMakeCache.txt's CMAKE_BUILD_TYPE, SHARDTRAIN_NATIVE
  std::vector<std::string> nvcc;            // the last line of `nvcc --version` ([] when it fails)
  std::optional<std::string> cxx;           // the first line of `c++ --version`
  std::optional<std::string> build_os;      // /etc/os-release PRETTY_NAME
  std::string glibc;                        // this process's glibc: the oldest the programs may need
  std::vector<std::string> cpu_flags_used_by_native;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("type", &BundleBuildInfo::type), constant("cuda_architectures", "90"),
                      key("native", &BundleBuildInfo::native), key("nvcc", &BundleBuildInfo::nvcc),
                      key("cxx", &BundleBuildInfo::cxx), key("build_os", &BundleBuildInfo::build_os),
                      key("glibc", &BundleBuildInfo::glibc),
                      key("cpu_flags_used_by_native", &BundleBuildInfo::cpu_flags_used_by_native)};
  }
};

struct BundleManifest {
  std::string created;                      // written: UTC, RFC 3339
  std::string code_version;
  std::string compiled_testdata, compiled_bin, compiled_source;  // compiled_paths/testdata, /bin, /source
  BundleBuildInfo build;
  // Debian package versions (null: not installed), then the bundled CUDA runtime's file name.
  std::optional<std::string> openmpi, pmix, hdf5, onednn;
  std::string cuda_runtime_bundled;
  std::vector<std::string> provided_by_device, openmpi_components_left_out;
  std::vector<BundleFile> files;

  // Every key of the format (docs/FORMATS.md), once; files in this order.
  static auto fields() {
    using namespace json_fields;
    using M = BundleManifest;
    return std::tuple{format_tag("format", "shardtrain-gpu-bundle", "device bundle manifest"), version("format_version", 1),
                      key("created", &M::created), key("code_version", &M::code_version), key("build", &M::build),
                      group("compiled_paths", key("testdata", &M::compiled_testdata), key("bin", &M::compiled_bin),
                            key("source", &M::compiled_source)),
                      group("versions", key("openmpi", &M::openmpi), key("pmix", &M::pmix), key("hdf5", &M::hdf5),
                            key("onednn", &M::onednn), key("cuda_runtime_bundled", &M::cuda_runtime_bundled)),
                      key("provided_by_device", &M::provided_by_device),
                      key("openmpi_components_left_out", &M::openmpi_components_left_out), key("files", &M::files)};
  }
  // json_fields::read and write over fields(): a missing or mistyped field is a UsageError naming
  // the file and the field.
  static BundleManifest from_json(const JsonFile& file) { return json_fields::read<BundleManifest>(file, ""); }
  nlohmann::json to_json() const { return json_fields::write(*this); }
};
BundleManifest read_bundle_manifest(const std::string& path);

// What the writer is given: the staged bundle folder, the build it was packed from (its
// CMakeCache.txt), the source tree (git describe; its testdata), a file of the Open MPI components
// left out (names separated by white space), the CUDA compiler and the bundled CUDA runtime's file.
struct BundleSources {
  std::string bundle, build, source, dropped_file, nvcc, cudart;
};
// The manifest of the staged bundle: every file and link under it but manifest.json, sorted by
// path, with what the build, this machine and its packages say. BUNDLE/lib/device-libs.txt must be
// there (device-bundle.sh writes it). A missing folder or file is a UsageError naming it (exit 2):
// the bundle is packed wrong, not a disk to fix. Commands that fail or are missing (git, nvcc,
// dpkg-query) leave their fields null, as on a machine without them.
BundleManifest bundle_manifest_of(const BundleSources& sources);
// Writes BUNDLE/manifest.json durably (write_json_file), and says on stderr how many files and bytes.
void write_bundle_manifest(const std::string& bundle_dir, const BundleManifest& manifest);

// The manifest's paths the bundle does not hold as listed: a link with another target, a file
// missing or of another SHA-256.
std::vector<std::string> bundle_mismatches(const std::string& bundle_dir, const BundleManifest& manifest);

}  // namespace shardtrain::deviceproof
