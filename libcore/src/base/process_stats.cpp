#include "shardtrain/base/process_stats.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace shardtrain {

ProcessMemory process_memory() {
  ProcessMemory m;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    // "VmRSS:\t  123456 kB"
    const auto kib = [&line] { return std::stod(line.substr(line.find(':') + 1)) * 1024.0; };
    if (line.rfind("VmRSS:", 0) == 0) m.resident_bytes = kib();
    else if (line.rfind("VmHWM:", 0) == 0) m.resident_peak_bytes = kib();
  }
  return m;
}

double seconds_since_process_start() {
  std::ifstream stat_file("/proc/self/stat"), uptime_file("/proc/uptime");
  std::string stat;
  double uptime = 0;
  if (!std::getline(stat_file, stat) || !(uptime_file >> uptime)) return 0;
  // Field 2 (the command) is in parentheses and may hold spaces: count fields after its ')'.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field;) ++i;  // fields 3..21
  unsigned long long start_ticks = 0;
  if (!(fields >> start_ticks)) return 0;           // field 22: start time, clock ticks after boot
  const long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? uptime - double(start_ticks) / double(hz) : 0;
}

}  // namespace shardtrain
