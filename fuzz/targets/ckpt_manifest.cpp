// Fuzz target: a checkpoint's manifest (the `manifest` attribute of index.h5 or of a consolidated
// file), through CheckpointManifest::from_stored_text, the reader every checkpoint open goes through:
// once with the input's true sha256 (as an intact index holds it), once with a stale one.
#include "fuzz_target.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/ckpt/format.hpp"

SHARDTRAIN_FUZZ_TARGET(ckpt_manifest) {
  using namespace shardtrain;
  const std::string text(fuzz::as_text(data, size));
  const std::string where = "step_1/index.h5";
  const std::string sha = to_hex(sha256(text.data(), text.size()));
  fuzz::expect_reader_contract(where, [&] { (void)ckpt::CheckpointManifest::from_stored_text(text, sha, where); });
  fuzz::expect_reader_contract(where, [&] {
    (void)ckpt::CheckpointManifest::from_stored_text(text, std::string(64, '0'), where);
  });
}
