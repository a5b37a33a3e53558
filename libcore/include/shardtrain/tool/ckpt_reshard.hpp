// ckpt-reshard's body (tools/ckpt-reshard.cpp parses the options into CkptReshardOptions): one of
// four modes, each one call into the library:
//   reshard      parallel/reshard.hpp      CKPT --out DIR --world W [--zero-stage S] [--tp T]
//   consolidate  ckpt/consolidated.hpp     CKPT --consolidate --out FILE.h5
//   export       model/hf_export.hpp       CKPT --export hf --out DIR [--dtype] [--data FILE] [--registry DIR]
//                                          (safetensors: the same; --out may also be FILE.safetensors)
//   inspect      ckpt/inspect.hpp          --inspect CKPT [--json]
//   import       model/hf_import.hpp       --import hf DIR --out CKPT_DIR [--world W --zero-stage S --tp T]
//                                          [--model NAME] (then parallel/reshard.hpp writes it for that layout)
// Exit codes: 0 done (inspect: every checksum verified), 1 inspect found a corrupt checkpoint, 2 a
// refusal (bad options, a source failing validation, an existing output, a target the state cannot
// be split into, a model that cannot be split --tp ways, a dtype loss on moments), 3 I/O failure while writing.
#pragma once
#include <string>

namespace shardtrain {

struct CkptReshardOptions {
  std::string source;        // CKPT: step_<N> folder, checkpoint directory or consolidated file
  std::string out;
  int world = 0;             // reshard target world size (0: not a reshard)
  int zero_stage = -1;       // -1: keep the source's stage
  int tp = 1;
  bool consolidate = false;
  std::string export_format; // "", "hf" or "safetensors" (the same export)
  std::string data;          // export: the dataset the checkpoint trained on (tokenizer, separator)
  std::string registry;      // export: a release registry holding the checkpoint's record (model card)
  std::string dtype = "fp32";  // fp32 | bf16 (export only: the state is copied bit for bit)
  std::string import_format;  // "" or "hf"
  std::string import_dir;     // --import hf DIR
  std::string model;          // --model NAME beside --import: config.json must have that preset's shape
  bool inspect = false;
  bool json = false;
};

// Throws UsageError for an invalid combination (one line naming the options and what to do).
void check_ckpt_reshard_options(const CkptReshardOptions& o);
// Whether the mode needs MPI (reshard: each process writes its share of the target files).
bool ckpt_reshard_needs_mpi(const CkptReshardOptions& o);
// Runs the mode; returns the exit code (errors are thrown, as in every tool body).
int run_ckpt_reshard(const CkptReshardOptions& o);

}  // namespace shardtrain
