#include "shardtrain/base/host.hpp"

#include <unistd.h>

#include <algorithm>
#include <thread>

namespace shardtrain {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

int host_cpus() { return std::max(1, int(std::thread::hardware_concurrency())); }

}  // namespace shardtrain
