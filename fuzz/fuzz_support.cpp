#include "fuzz_support.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>

#include "shardtrain/base/error.hpp"

namespace shardtrain::fuzz {
namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

struct Scratch {
  std::string dir;
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/shardtrain-fuzz-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

std::map<std::string, TargetBody>& registry() {
  static std::map<std::string, TargetBody> targets;
  return targets;
}

}  // namespace

void expect_reader_contract(const std::string& names, const std::function<void()>& read) {
  try {
    read();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (e.code() != ExitCode::kUsage && e.code() != ExitCode::kIo)
      finding("exit code " + std::to_string(int(e.code())) + " for bad input (expected 2 or 3): " + message);
    if (message.find(names) == std::string::npos)
      finding("the error does not name '" + names + "': " + message);
  } catch (const std::exception& e) {
    finding(std::string("an exception that is not a shardtrain::Error (the tool's \"internal error\"): ") + e.what());
  } catch (...) {
    finding("an exception of unknown type");
  }
}

const std::string& scratch_dir() {
  static Scratch scratch;
  return scratch.dir;
}

std::string write_input(const std::string& name, std::string_view bytes) {
  const std::filesystem::path path = std::filesystem::path(scratch_dir()) / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out.flush()) finding("cannot write the scratch input " + path.string());
  return path.string();
}

void copy_fixture(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  if (!in || !out.flush()) finding("cannot copy the fixture " + from + " to " + to);
}

bool register_target(const char* name, TargetBody body) {
  registry()[name] = body;
  return true;
}

TargetBody find_target(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

}  // namespace shardtrain::fuzz
