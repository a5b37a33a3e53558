// Durable, atomic files: the one way libcore replaces a file a reader may open at any moment
// (datasets, parameters files, summaries, flight records, the checkpoint `latest` pointer).
// The rule: write everything to a temporary name beside the target, fsync it, rename it over the
// target (atomic on POSIX file systems), then fsync the folder so the rename itself survives a
// crash. A reader sees the old file or the new one, never a part of either.
// Errors are IoError naming the path and what to do; a failed write leaves the target untouched
// and removes its temporary.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace shardtrain {

// fsync of a file or a folder (opened read-only). Throws IoError naming the path.
void fsync_path(const std::string& path);

// Writes `content` to `path` atomically and durably through `path`.tmp.
void write_file_atomically(const std::string& path, const std::string& content);

// The second half of the rule, for a file already written in full at `temporary` (by HDF5, say):
// fsync it, rename it over `path`, fsync the parent folder. Removes `temporary` when it fails.
void commit_file_atomically(const std::string& temporary, const std::string& path);

// write_file_atomically of `value` pretty-printed (2 spaces) with a final newline.
void write_json_file(const std::string& path, const nlohmann::json& value);

}  // namespace shardtrain
