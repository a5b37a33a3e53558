#include "shardtrain/deviceproof/bundle_manifest.hpp"

#include <gnu/libc-version.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/base/time.hpp"

namespace fs = std::filesystem;

namespace shardtrain::deviceproof {
namespace {


std::string file_sha256(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw IoError(p.string() + ": cannot open to hash it (permissions?)");
  Sha256 h;
  std::vector<char> block(1 << 20);
  while (in.read(block.data(), std::streamsize(block.size())) || in.gcount() > 0) h.update(block.data(), std::size_t(in.gcount()));
  return to_hex(h.digest());
}

// Bad input to the writer is the packing script's mistake: exit 2 naming the path.
std::string read_input(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in || fs::is_directory(path)) throw UsageError(path + ": cannot read " + what + " (device-bundle.sh writes it; repack)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The trimmed standard output of a command; nothing when it is missing or fails (a machine without
// git, dpkg or the package is still packed, with the field null).
std::optional<std::string> output_of(const std::vector<std::string>& argv) {
  try {
    const auto r = run_child_captured(argv, true);
    if (r.status != 0) return std::nullopt;
    const auto first = r.out.find_first_not_of(" \t\r\n"), last = r.out.find_last_not_of(" \t\r\n");
    return first == std::string::npos ? std::string() : r.out.substr(first, last - first + 1);
  } catch (const IoError&) {
    return std::nullopt;
  }
}

std::optional<std::string> package_version(const std::string& name) {
  return output_of({"dpkg-query", "-W", "-f=${Version}", name});
}

// KEY:TYPE=VALUE lines of CMakeCache.txt.
std::optional<std::string> cache_value(const std::string& cache_text, const std::string& key) {
  for (const auto& l : lines(cache_text))
    if (l.rfind(key + ":", 0) == 0) {
      const auto eq = l.find('=');
      if (eq == std::string::npos) return std::nullopt;
      auto v = l.substr(eq + 1);
      v.erase(v.find_last_not_of(" \t\r") + 1);
      return v;
    }
  return std::nullopt;
}

std::optional<std::string> os_pretty_name() {
  for (const char* p : {"/etc/os-release", "/usr/lib/os-release"}) {
    std::ifstream in(p);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("PRETTY_NAME=", 0) == 0) {
        auto v = l.substr(12);
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
        return v;
      }
  }
  return std::nullopt;
}

// The vector extensions -march=native may use, of this processor (/proc/cpuinfo's first flags
// line): `launch` warns where the device's processor lacks one (the program would die with SIGILL).
std::vector<std::string> native_cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("flags", 0) != 0) continue;
    const auto colon = l.find(':');
    if (colon == std::string::npos) continue;
    for (const auto& f : words(l.substr(colon + 1)))
      for (const char* prefix : {"avx", "amx", "fma", "bmi", "sse4", "f16c"})
        if (f.rfind(prefix, 0) == 0) {
          out.push_back(f);
          break;
        }
    break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<BundleFile> file_list(const std::string& bundle) {
  std::vector<BundleFile> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(bundle, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    const std::string rel = p.lexically_relative(bundle).string();
    const auto st = fs::symlink_status(p);
    BundleFile f;
    f.path = rel;
    if (fs::is_symlink(st)) {  // not followed: a link to a folder is listed as the link it is
      f.link = fs::read_symlink(p).string();
    } else if (fs::is_regular_file(st) && rel != "manifest.json") {
      f.bytes = fs::file_size(p);
      f.sha256 = file_sha256(p);
      const auto x = fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
      f.mode = (st.permissions() & x) != fs::perms::none ? "755" : "644";
    } else {
      continue;  // folders are implied by their files
    }
    files.push_back(std::move(f));
  }
  if (ec) throw IoError(bundle + ": cannot list the staged bundle (" + ec.message() + ")");
  std::sort(files.begin(), files.end(), [](const BundleFile& a, const BundleFile& b) { return a.path < b.path; });
  return files;
}

}  // namespace

void BundleFile::validate(const JsonFile& f, const std::string& at) const {
  if (!is_link() && sha256.empty()) f.fail("field " + at + " has neither \"link\" nor \"sha256\"");
}

BundleManifest read_bundle_manifest(const std::string& path) {
  return BundleManifest::from_json(JsonFile::read(path, "the bundle manifest"));
}

BundleManifest bundle_manifest_of(const BundleSources& s) {
  if (!fs::is_directory(s.bundle)) throw UsageError(s.bundle + ": no staged bundle folder there (device-bundle.sh stages it)");
  const std::string cache = read_input(s.build + "/CMakeCache.txt", "the build's CMake cache (is --build a configured build?)");
  BundleManifest m;
  m.provided_by_device = words(read_input(s.bundle + "/lib/device-libs.txt", "the device libraries' list"));
  m.openmpi_components_left_out = words(read_input(s.dropped_file, "the --dropped list of Open MPI components"));
  m.files = file_list(s.bundle);
  m.created = now_rfc3339();
  // "unknown" rather than null: the reader needs a string, and a tree without git is still packable.
  m.code_version = output_of({"git", "-C", s.source, "describe", "--always", "--dirty", "--tags"}).value_or("unknown");
  m.build.type = cache_value(cache, "CMAKE_BUILD_TYPE");
  m.build.native = cache_value(cache, "SHARDTRAIN_NATIVE");
  if (const auto v = output_of({s.nvcc, "--version"}); v && !v->empty()) m.build.nvcc = {lines(*v).back()};
  if (const auto v = output_of({"c++", "--version"}); v && !v->empty()) m.build.cxx = lines(*v).front();
  m.build.build_os = os_pretty_name();
  m.build.glibc = gnu_get_libc_version();
  m.build.cpu_flags_used_by_native = native_cpu_flags();
  // Where the test binary looks for its data and tools (compiled-in paths); gpu-check's build stage links them.
  m.compiled_testdata = (fs::path(s.source) / "testdata").string();
  m.compiled_bin = (fs::path(s.build) / "bin").string();
  m.compiled_source = s.source;
  m.openmpi = package_version("openmpi-bin");
  m.pmix = package_version("libpmix2");
  m.hdf5 = package_version("libhdf5-dev");
  m.onednn = package_version("libdnnl-dev");
  m.cuda_runtime_bundled = fs::path(s.cudart).filename().string();
  return m;
}

void write_bundle_manifest(const std::string& bundle_dir, const BundleManifest& m) {
  write_json_file(bundle_dir + "/manifest.json", m.to_json());
  std::uintmax_t bytes = 0;
  for (const auto& f : m.files) bytes += f.bytes;
  std::cerr << "gpu-check manifest: " << m.files.size() << " files, " << bytes << " bytes\n";
}

std::vector<std::string> bundle_mismatches(const std::string& bundle_dir, const BundleManifest& manifest) {
  std::vector<std::string> bad;
  for (const auto& f : manifest.files) {
    const fs::path p = fs::path(bundle_dir) / f.path;
    std::error_code ec;
    bool ok = false;
    if (f.is_link()) {
      ok = fs::is_symlink(fs::symlink_status(p, ec)) && fs::read_symlink(p, ec).string() == f.link;
    } else if (fs::is_regular_file(fs::symlink_status(p, ec))) {
      try {
        ok = file_sha256(p) == f.sha256;
      } catch (const IoError&) {
        ok = false;  // unreadable: as good as altered
      }
    }
    if (!ok) bad.push_back(f.path);
  }
  return bad;
}

}  // namespace shardtrain::deviceproof
