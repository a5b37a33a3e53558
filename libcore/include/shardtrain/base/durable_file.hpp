// Durable, atomic files: the one way libcore replaces a file a reader may open at any moment
// (datasets, parameters files, summaries, flight records, the checkpoint `latest` pointer).
// The rule: write everything to a temporary name beside the target, fsync it, rename it over the
// target (atomic on POSIX file systems), then fsync the folder so the rename itself survives a
// crash. A reader sees the old file or the new one, never a part of either.
// A file that only has to be whole, not to outlive a power failure, may skip the fsyncs
// (Durability::kVisible): see there.
// Errors are IoError naming the path and what to do; a failed write leaves the target untouched
// and removes its temporary.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace shardtrain {

// fsync of a file or a folder (opened read-only). Throws IoError naming the path.
void fsync_path(const std::string& path);

// How far a write through a temporary goes before it returns.
enum class Durability {
  // fsync the temporary, rename it, fsync the folder: the new file survives a crash or a power
  // failure. Checkpoints, datasets, summaries, pointers: anything a later run resumes from.
  kDurable,
  // rename only: any reader sees the old file or the whole new one, at once, but a power failure
  // may lose it. For records that must appear within a deadline and are read on this machine
  // moments later: a flight record written on SIGTERM has about a second (Open MPI's
  // odls_base_sigkill_timeout) before SIGKILL, and two fsyncs on a loaded disk can take longer,
  // leaving only the temporary behind.
  kVisible,
};

// Writes `content` to `path` atomically through `path`.tmp, as durably as `durability` says.
void write_file_atomically(const std::string& path, const std::string& content,
                           Durability durability = Durability::kDurable);

// The second half of the rule, for a file already written in full at `temporary` (by HDF5, say):
// fsync it, rename it over `path`, fsync the parent folder. Removes `temporary` when it fails.
void commit_file_atomically(const std::string& temporary, const std::string& path);

// write_file_atomically of `value` pretty-printed (2 spaces) with a final newline.
void write_json_file(const std::string& path, const nlohmann::json& value,
                     Durability durability = Durability::kDurable);

}  // namespace shardtrain
