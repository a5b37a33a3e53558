// Fuzz target: data-prep's JSONL document parser, through run_data_prep on one input file. Byte 0
// picks the options (bit 0: --skip-bad, bit 1: pre-tokenised, vocabulary 300, separator 0, bit 2:
// --available-by); the rest is the file. A bad line is a UsageError "FILE:LINE: reason" (or a
// reject with --skip-bad), never a crash.
#include "fuzz_target.hpp"
#include "shardtrain/data/data_prep.hpp"

SHARDTRAIN_FUZZ_TARGET(data_prep_jsonl) {
  using namespace shardtrain;
  if (size == 0) return;
  const std::uint8_t mode = data[0];
  const std::string path = fuzz::write_input("docs.jsonl", fuzz::as_text(data + 1, size - 1));
  data::DataPrepOptions options;
  options.jsonl_inputs = {path};
  options.output = fuzz::scratch_dir() + "/docs.h5";
  options.progress_interval_s = 0;
  if (mode & 1) options.skip_bad = fuzz::scratch_dir() + "/rejects.jsonl";
  if (mode & 2) {
    options.vocab = 300;
    options.tokenizer = "fuzz";
    options.separator = 0;
  }
  if (mode & 4) options.available_by = "2024-06-01T00:00:00Z";
  fuzz::expect_reader_contract(path, [&] { (void)data::run_data_prep(options); });
}
