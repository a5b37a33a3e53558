// Shared helpers for the Catch2 tests: paths, MPI start-up on demand, tolerance comparisons.
#pragma once
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/comm/mpi.hpp"

namespace shardtrain::test {

// The message of the UsageError that `call` throws, or "accepted" when it throws none (any other
// exception propagates): for tables of bad inputs and the one line each must be refused with.
template <class Call>
std::string usage_error_of(Call&& call) {
  try {
    call();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

// T's reader over `j` as if read from a file "test.json" (the typed readers take a JsonFile and
// a pointer): the round trips' way back, and their errors name the field by pointer. A type with a
// field list (base/json_record.hpp) is read by it, any other by its from_json.
template <typename T>
T read_back(const nlohmann::json& j) {
  const JsonFile f = JsonFile::parse(j.dump(), "test.json", "the value");
  if constexpr (requires { T::fields(); }) return json_fields::read<T>(f, "");
  else return T::from_json(f, "");
}

// testdata/ in the source tree.
std::string testdata_path(const std::string& relative);
// Cases that need what a machine may lack carry a tag of the gate's (main.cpp): "[gpu]" a CUDA
// device, "[needs-tmpfs]" the right to mount a small tmpfs (a real full disk), "[needs-h5dump]"
// the h5dump tool. ctest runs each tag as an entry of its own, which reports "skipped" (exit 77)
// with this reason where the machine lacks it. "" when it has it, or for any other tag.
std::string missing_requirement(const std::string& tag);
// Built tool binaries (build/bin).
std::string tool_path(const std::string& name);
// A built tool run to its end with `args` (each quoted for the shell): its exit status (-1 when a
// signal ended it), standard output and standard error.
struct ToolRun {
  int status = -1;
  std::string out, err;
};
ToolRun run_built_tool(const std::string& name, const std::vector<std::string>& args);
// A fresh empty temporary folder, removed at process exit.
std::string temp_dir(const std::string& tag);
// The whole file's bytes ("" when it cannot be opened).
std::string file_contents(const std::string& path);
// Collective over MPI_COMM_WORLD: rank 0 makes a temp_dir(tag), every rank returns its path.
std::string shared_temp_dir(const std::string& tag);

// MPI_Init_thread(MPI_THREAD_MULTIPLE) on first call (works as a singleton without mpirun).
void ensure_mpi();
void finalize_mpi_if_started();
// A Communicator over `base` (MPI_COMM_WORLD in [mpi] cases, MPI_COMM_SELF in one-rank ones) with
// a 60 s collective timeout, so a test that hangs fails in a minute rather than the default 300 s.
// Collective over `base`; starts MPI (ensure_mpi) first.
std::unique_ptr<Communicator> test_communicator(MPI_Comm base, const std::string& name = "test");

// max|a-b| / max(max|b|, tiny): the "relative error in max norm" used by the reference tests.
double max_norm_relative_error(const std::vector<float>& a, const std::vector<float>& b);
double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b);

// Deterministic pseudo-random test inputs (uniform in [lo, hi)), seeded.
std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f);

// Small integers in [-5, 5], a function of (rank, index, salt): sums of a few of them are exact in
// any order, so collective results can be compared exactly whatever order a library adds in.
template <typename T>
std::vector<T> int_values(std::size_t n, int rank, int salt) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = T(int((rank * 7 + i * 3 + salt) % 11) - 5);
  return v;
}

// The canonical binary tree of contract 2 of docs/ARCHITECTURE.md (communicator.hpp), serially, over inputs[lo, hi)
// (hi - lo a power of two): left half + right half at every level. Written here independently
// of the library's algorithms, as the reference they are checked against.
template <typename T>
std::vector<T> tree_sum(const std::vector<std::vector<T>>& inputs, std::size_t lo, std::size_t hi) {
  if (hi - lo == 1) return inputs[lo];
  const std::size_t mid = lo + (hi - lo) / 2;
  auto a = tree_sum(inputs, lo, mid);
  const auto b = tree_sum(inputs, mid, hi);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = a[i] + b[i];
  return a;
}

// Same size and the same bytes (so -0.0 != 0.0 and NaN payloads count).
template <typename T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Upload a host vector into a fresh device array of the same size.
template <typename T>
DeviceArray<T> to_device(Backend& backend, const std::vector<T>& host) {
  DeviceArray<T> d(backend, host.size());
  if (!host.empty()) d.upload(host.data(), host.size());
  return d;
}

// Download a whole device array (waits for the queue: download is ordered after queued work).
template <typename T>
std::vector<T> to_host(const DeviceArray<T>& d) {
  std::vector<T> host(d.size());
  if (!host.empty()) d.download(host.data(), host.size());
  return host;
}

}  // namespace shardtrain::test
