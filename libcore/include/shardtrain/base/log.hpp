// Logging: every line starts "[rank R/W]" so lines from many ranks interleave readably.
// Rank and world size are set once by the tool main (set_log_identity); before that "[rank 0/1]".
#pragma once
#include <string>

namespace shardtrain {

void set_log_identity(int rank, int world_size);
int log_world_size();
int log_rank();

// The "[rank R/W] " prefix.
std::string log_prefix();

// Writes "[rank R/W] message" plus a newline to stderr, atomically with respect to other log lines.
void log_line(const std::string& message);

// Same, only when this rank is rank 0 (progress lines that every rank would repeat).
void log_line_rank0(const std::string& message);

// Code version (git describe at build time), written into logs, summaries and checkpoints.
const char* code_version();

}  // namespace shardtrain
