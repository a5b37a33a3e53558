// The machine a process runs on, as every record names it: flight records, run summaries, the
// trainer's placement of ranks on GPUs and its check for ranks sharing cores.
#pragma once
#include <string>

namespace shardtrain {

// gethostname(), "" if it fails.
std::string host_name();
// Online CPUs (std::thread::hardware_concurrency; at least 1).
int host_cpus();

}  // namespace shardtrain
