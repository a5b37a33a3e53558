#include "test_support.hpp"

#include <mpi.h>
#include <sys/mount.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

#include <sys/wait.h>

namespace shardtrain::test {
namespace {
bool g_started_mpi = false;
// The folders to remove at exit. A namespace-scope object defined before g_cleanup, so it is
// destroyed after g_cleanup's destructor has used it (a function-local static created on first use
// would be created after g_cleanup and destroyed before it: the cleanup then walked a destroyed
// vector, an occasional segfault at exit of the [mpi] runs).
std::vector<std::filesystem::path> g_temp_dirs;
std::vector<std::filesystem::path>& temp_dirs() { return g_temp_dirs; }
struct TempCleanup {
  ~TempCleanup() {
    std::error_code ec;
    for (auto& d : temp_dirs()) std::filesystem::remove_all(d, ec);
  }
} g_cleanup;
}  // namespace

std::string missing_requirement(const std::string& tag) {
  if (tag == "[gpu]" && !cuda_backend_available()) {
#ifdef SHARDTRAIN_HAVE_CUDA
    return "this build has the CUDA backend but no CUDA device is visible";
#else
    return "this is a CPU-only build (no nvcc found, or -DSHARDTRAIN_CUDA=OFF)";
#endif
  }
  if (tag == "[needs-tmpfs]") {  // the same mount the case makes, on a folder of its own
    const std::string dir = temp_dir("tmpfs-probe");
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") != 0)
      return std::string("cannot mount a small tmpfs here (") + std::strerror(errno) +
             "); run as root with mount rights to test a full disk";
    ::umount2(dir.c_str(), MNT_DETACH);
  }
  if (tag == "[needs-h5dump]" && std::system("command -v h5dump > /dev/null 2>&1") != 0)
    return "h5dump is not installed (Debian: apt-get install hdf5-tools)";
  return "";
}

std::string testdata_path(const std::string& relative) {
  return std::string(SHARDTRAIN_TESTDATA) + "/" + relative;
}

std::string tool_path(const std::string& name) { return std::string(SHARDTRAIN_BIN_DIR) + "/" + name; }

ToolRun run_built_tool(const std::string& name, const std::vector<std::string>& args) {
  const auto quoted = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string dir = temp_dir("tool-run");
  std::string cmd = quoted(tool_path(name));
  for (const auto& a : args) cmd += " " + quoted(a);
  cmd += " > " + quoted(dir + "/out.txt") + " 2> " + quoted(dir + "/err.txt");
  const int raw = std::system(cmd.c_str());
  const auto read = [&](const char* file) {
    std::ifstream in(dir + "/" + file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ToolRun r;
  r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read("out.txt");
  r.err = read("err.txt");
  return r;
}

std::string file_contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string temp_dir(const std::string& tag) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / ("shardtrain-" + tag + "-XXXXXX")).string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  temp_dirs().emplace_back(buf.data());
  return buf.data();
}

std::string shared_temp_dir(const std::string& tag) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string path = rank == 0 ? temp_dir(tag) : std::string();
  int len = int(path.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  path.resize(std::size_t(len));
  MPI_Bcast(path.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

void ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  g_started_mpi = true;
}

void finalize_mpi_if_started() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> test_communicator(MPI_Comm base, const std::string& name) {
  ensure_mpi();
  CommOptions o;
  o.name = name;
  o.timeout = std::chrono::milliseconds(60000);
  return make_mpi_communicator(base, o);
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("max_abs_difference: size mismatch");
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  return worst;
}

double max_norm_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 0.0;
  for (float x : b) scale = std::max(scale, std::fabs(double(x)));
  return max_abs_difference(a, b) / std::max(scale, 1e-30);
}

std::vector<float> random_floats(std::size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (auto& x : out) x = dist(gen);
  return out;
}

}  // namespace shardtrain::test
