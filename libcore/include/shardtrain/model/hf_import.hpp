// Import of a Hugging Face GPT-2 folder (config.json + model.safetensors, as save_pretrained writes
// it) as a training state at step 0, so ddp-train/fsdp-train --resume fine-tunes a model from the
// Hugging Face world. The inverse of hf_export.hpp: the same names and Conv1D transposes.
//
// Accepted: config.json with model_type "gpt2" (architectures GPT2LMHeadModel or GPT2Model, when
// given); activation_function gelu_new or gelu_pytorch_tanh (both the tanh GELU of our decoder);
// layer_norm_epsilon 1e-5; n_inner null or 4 x n_embd; n_ctx (when given) = n_positions; no
// cross-attention, scale_attn_weights true, scale_attn_by_inverse_layer_idx false; the LM head tied
// to wte (tie_word_embeddings true, and an lm_head.weight, if stored, equal to wte). Weights F32,
// BF16 or F16 (converted exactly to float32), with or without the "transformer." prefix; GPT-2's
// attention-mask buffers (attn.bias, attn.masked_bias) are ignored. Any vocabulary size (the
// tensor-parallel layout pads it internally). Anything else: UsageError naming the field and why.
//
// The state: the weights, both AdamW moments zero, step 0. The manifest records where it came
// from in extra.imported_from = {"format": "hf-gpt2", "folder": <name>, "files": [{name, sha256,
// bytes}] (config.json, model.safetensors: the source identity), "torch_dtype"}; the trainer takes
// such a checkpoint as a fine-tune start (any data, batch and seed; train/trainer.hpp fine_tune).
#pragma once
#include <memory>
#include <string>

#include "shardtrain/ckpt/read.hpp"
#include "shardtrain/model/config.hpp"

namespace shardtrain {

// Reads and checks `folder`; returns the state as a tensor source (in memory) whose manifest has
// layout world 1, DDP, micro batch 1 and global batch `data_parallel` (placeholders a fine-tune
// replaces; the global batch so that a resharder can lay it out for that many DP ranks). With
// `model_name` (ckpt-reshard --import hf DIR --model NAME), config.json's shape must be that
// preset's (require_hf_shape), checked before the weights are read.
std::unique_ptr<ckpt::TensorSource> import_hf_gpt2(const std::string& folder, int data_parallel = 1,
                                                   const std::string& model_name = "");

// `config` (read from `config_path`) is the shape of kModelPresets' `model_name`, else UsageError
// naming the file and every field that differs by config.json's own name (vocab_size,
// n_positions, n_embd, n_layer, n_head) with both values; an unknown name is model_preset's error.
void require_hf_shape(const ModelConfig& config, const std::string& model_name, const std::string& config_path);

// The ModelConfig of a GPT-2 config.json, after the checks above (UsageError naming `where`).
ModelConfig model_config_from_hf(const nlohmann::json& config, const std::string& where);

}  // namespace shardtrain
