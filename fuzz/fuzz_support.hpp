// What every fuzz target shares: the reader contract, input files for readers that take a path,
// and the registry of fuzz_replay.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace shardtrain::fuzz {

// The promise of every reader of outside bytes (issue 50): it returns a value, or it throws one
// shardtrain::Error (base/error.hpp: UsageError exit 2, IoError exit 3) whose message names the
// input, i.e. contains `names` (the file's path, or the option). Anything else is a finding and
// aborts the process with the reason on stderr, so libFuzzer saves the input and the replay fails:
// another exception (the tool's "internal error", exit 70), an Error of another exit code, or a
// message that does not say which file. Crashes, hangs and huge allocations are libFuzzer's and the
// sanitizers' to catch.
void expect_reader_contract(const std::string& names, const std::function<void()>& read);

// The input as text (readers of JSON, JSONL, command lines).
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A scratch folder of this process (created on first use under $TMPDIR or /tmp, removed at exit).
const std::string& scratch_dir();
// Writes the input to scratch_dir()/<name> (replacing it) and returns the path: for readers that
// take a path. `name` may contain '/', the folders are created.
std::string write_input(const std::string& name, std::string_view bytes);
// Copies a fixture file (replacing `to`). Not std::filesystem::copy_file: libFuzzer's -timeout arms
// SIGALRM every second, and copy_file's sendfile/copy_file_range gives up with EINTR (a throw the
// target would report as a finding; seen under load). Streams retry an interrupted read or write.
void copy_fixture(const std::string& from, const std::string& to);

// fuzz_replay's registry (SHARDTRAIN_FUZZ_TARGET registers each target's body under its name).
using TargetBody = void (*)(const std::uint8_t* data, std::size_t size);
bool register_target(const char* name, TargetBody body);
TargetBody find_target(const std::string& name);  // nullptr when none has that name

}  // namespace shardtrain::fuzz
