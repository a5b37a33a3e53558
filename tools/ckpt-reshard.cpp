// ckpt-reshard: rewrite a checkpoint for another world size / ZeRO stage, consolidate it into one
// HDF5 file, export the weights as GPT-2 safetensors, or inspect it. Options + one call into
// libcore (tool/ckpt_reshard.hpp). See ckpt-reshard(1).
#include "shardtrain/model/config.hpp"
#include "shardtrain/tool/ckpt_reshard.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  shardtrain::CkptReshardOptions o;
  std::vector<std::string> import_args;
  CLI::App app{"Rewrite a checkpoint laid out for another world size / ZeRO stage (each target rank then reads one "
               "local file), consolidate it into one plain HDF5 file, export it as a Hugging Face GPT-2 "
               "folder, or inspect it. See ckpt-reshard(1).",
               "ckpt-reshard"};
  app.add_option("CKPT", o.source, "A step_<N> checkpoint folder, a checkpoint directory (--ckpt-dir: the checkpoint "
                                   "`latest` names, else the newest valid) or a consolidated .h5 file")
      ;
  app.add_option("--import", import_args, "Import a Hugging Face GPT-2 folder (config.json + model.safetensors, "
                                          "fp32/bf16/fp16) as a step-0 checkpoint with fresh optimizer state: "
                                          "--import hf DIR --out CKPT_DIR [--world W --zero-stage S --tp T]")
      ->expected(2);
  app.add_option("--model", o.model, "With --import: the shape the folder must have, a named one (" +
                                         shardtrain::model_preset_names() + "); config.json differing from it "
                                         "in any field: exit 2 naming the field, both values and the file");
  app.add_option("--out", o.out, "Output: the new checkpoint directory (reshard), the .h5 file (--consolidate) or the "
                                 "export folder (--export). Must not exist");
  app.add_option("--world", o.world, "Reshard: the target world size W (rank files rank_00000.h5 .. W-1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--zero-stage", o.zero_stage, "Reshard: the target ZeRO stage, 0 (DDP) to 3 (default: the source's)")
      ->check(CLI::Range(0, 3));
  app.add_option("--tp", o.tp, "Reshard: the target tensor-parallel degree T (W/T data-parallel ranks; TP ranks adjacent, as "
                                 "ddp-train/fsdp-train --tp lay them out)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--consolidate", o.consolidate, "Write one self-contained HDF5 file, every logical tensor a plain dataset");
  app.add_option("--export", o.export_format, "Export as a Hugging Face folder: hf (model.safetensors in GPT-2 names, "
                                              "config.json, generation_config.json, tokenizer files, README.md model "
                                              "card); safetensors is the same (--out may then name FILE.safetensors)");
  app.add_option("--data", o.data, "Export: the dataset file the checkpoint trained on (its tokenizer and separator; "
                                   "needed only for checkpoints that do not record them)");
  app.add_option("--registry", o.registry, "Export: a release registry; the model card reports the checkpoint's "
                                           "release record (decision, hold-out and gate figures) when it has one");
  app.add_option("--dtype", o.dtype, "Export element type: fp32 or bf16 (round to nearest even)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_flag("--inspect", o.inspect, "Print step, layout, model, data snapshot, tensors and sizes, and verify every "
                                       "file and tensor checksum (exit 1 naming the bad file when corrupt)");
  app.add_flag("--json", o.json, "With --inspect: the report as JSON on standard output");
  shardtrain::add_version_flag(app);
  shardtrain::ToolOptions options;
  options.needs_mpi_after_parse = [&] {
    if (import_args.size() == 2) o.import_format = import_args[0], o.import_dir = import_args[1];
    return shardtrain::ckpt_reshard_needs_mpi(o);
  };
  return shardtrain::run_tool(app, argc, argv, options, [&] { return shardtrain::run_ckpt_reshard(o); });
}
