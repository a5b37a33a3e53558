// What a checkpoint holds and whether it is intact (ckpt-reshard --inspect): step, layout, model,
// batch, sampler and LR position, data snapshot id and cutoff, history of rewrites, every tensor
// with its shape and size, and a checksum verdict from validating EVERY file (not only the first
// bad one): each rank file's size and SHA-256 against the manifest, then (when the files are
// intact) each tensor's sum64 read back whole. Also reads a consolidated file (consolidated.hpp).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace shardtrain::ckpt {

struct Inspection {
  bool valid = false;
  nlohmann::json report;   // the --json form (documented in docs/FORMATS.md, "ckpt-reshard --inspect")
  std::string text;        // the human form: aligned "key  value" lines, tensors, files, verdict line
  std::string problem;     // "" when valid; else the first problem, naming the file (and tensor)
};

// `path`: a step_<N> folder, a checkpoint directory (the folder its `latest` names, else the newest
// step_<N>: inspected as it is, corrupt or not), or a consolidated file. Throws UsageError only when
// `path` is none of these; a corrupt checkpoint is a report with valid = false.
Inspection inspect_checkpoint(const std::string& path);

}  // namespace shardtrain::ckpt
