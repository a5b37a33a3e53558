// Fuzz target: a Hugging Face GPT-2 folder's config.json, through import_hf_gpt2 (the folder has no
// model.safetensors: a config that passes every check then ends at the missing weights, named).
#include "fuzz_target.hpp"
#include "shardtrain/model/hf_import.hpp"

SHARDTRAIN_FUZZ_TARGET(hf_config) {
  using namespace shardtrain;
  const std::string folder = fuzz::scratch_dir() + "/hf";
  fuzz::write_input("hf/config.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(folder, [&] { (void)import_hf_gpt2(folder); });
}
