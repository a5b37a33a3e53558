#include "shardtrain/base/log.hpp"

#include <cstdio>
#include <mutex>

#ifndef SHARDTRAIN_VERSION
#define SHARDTRAIN_VERSION "unknown"
#endif

namespace shardtrain {
namespace {
int g_rank = 0;
int g_world = 1;
std::mutex g_log_mutex;
}  // namespace

void set_log_identity(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}
int log_world_size() { return g_world; }
int log_rank() { return g_rank; }

std::string log_prefix() {
  return "[rank " + std::to_string(g_rank) + "/" + std::to_string(g_world) + "] ";
}

void log_line(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::string line = log_prefix() + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void log_line_rank0(const std::string& message) {
  if (g_rank == 0) log_line(message);
}

const char* code_version() { return SHARDTRAIN_VERSION; }

}  // namespace shardtrain
