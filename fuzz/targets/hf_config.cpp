// Fuzz target: a Hugging Face GPT-2 folder's config.json, read as import_hf_gpt2 reads it
// (JsonFile::read, then model_config_from_hf with the file's path). The import itself checks that
// model.safetensors exists before it reads the config, so a folder holding only the fuzzed config
// would never reach the config's reader.
#include "fuzz_target.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/model/hf_import.hpp"

SHARDTRAIN_FUZZ_TARGET(hf_config) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("hf/config.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] {
    (void)model_config_from_hf(JsonFile::read(path, "the Hugging Face config").json(), path);
  });
}
