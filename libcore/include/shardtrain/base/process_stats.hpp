// What the kernel says of this process: its resident memory and how long ago it started. The run
// summary sets them beside its own accounting (tracked memory by category, phase times), so a
// figure the process holds but no category names, or a start-up the phases do not cover, shows.
// Linux (/proc/self); elsewhere every figure is 0 ("not known"), never an error.
#pragma once

namespace shardtrain {

struct ProcessMemory {
  double resident_bytes = 0;       // VmRSS: resident now
  double resident_peak_bytes = 0;  // VmHWM: the largest resident size so far
};
ProcessMemory process_memory();

// Seconds since the kernel started this process (from /proc/self/stat's start time against
// /proc/uptime, 10 ms resolution on the usual 100 Hz clock): the launch, not main() or MPI_Init.
double seconds_since_process_start();

}  // namespace shardtrain
