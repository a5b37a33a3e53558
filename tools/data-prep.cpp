// data-prep: documents (JSONL, text files) -> HDF5 token dataset; or a synthetic Markov corpus.
// Options here, everything else in libcore (data_prep.hpp, synthetic.hpp). See data-prep(1).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/data/fortunes.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/data/synthetic.hpp"
#include "shardtrain/tool/numbers.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace data = shardtrain::data;
  CLI::App app{"Turn JSONL or text documents into a shardtrain HDF5 token dataset (prints a JSON summary).\n"
               "Input lines: {\"id\", \"version\", \"owner\", \"event_time\", \"available_time\", \"text\" | \"tokens\"}.",
               "data-prep"};
  data::DataPrepOptions o;
  std::string owner, event_time, available_time, available_by, tokenizer, skip_bad, synthetic, synthetic_jsonl, fortunes,
      fortunes_jsonl;
  int64_t vocab = 0, separator = -1;
  data::MarkovOptions markov;
  app.add_option("inputs", o.jsonl_inputs, "JSONL files, one document per line ('-' reads standard input)");
  app.add_option("-o,--output", o.output, "Dataset file to write (replaced atomically)")->required();
  app.add_option("--text", o.text_inputs, "Plain text file or folder: one document per file (repeatable)");
  app.add_option("--llmc", o.llmc_inputs, "llm.c token shard (.bin: 256 x int32 header, uint16 GPT-2 tokens); "
                                         "each document between end-of-text tokens is one document (repeatable)");
  CLI::Option* fortunes_option = app.add_option(
      "--fortunes", fortunes, "A fortunes folder (Debian's /usr/share/games/fortunes): one document per fortune, by the "
                              "rule of docs/FORMATS.md \"Bundled corpora\"; written as JSONL first (--fortunes-jsonl), then read as one");
  app.add_option("--fortunes-jsonl", fortunes_jsonl, "--fortunes: where its JSONL goes (default: the output's name with .jsonl)")
      ->needs(fortunes_option);
  app.add_option("--owner", owner, "--text/--llmc: owner of the documents (default: the file's name)");
  app.add_option("--doc-version", o.text.version, "--text/--llmc: document version")->capture_default_str();
  app.add_option("--event-time", event_time, "--text/--llmc: RFC 3339 event time (default: file modification time)");
  app.add_option("--available-time", available_time, "--text/--llmc: RFC 3339 availability time (default: event time)");
  app.add_option("--vocab", vocab, "Vocabulary size of 'tokens' input (default: 256, bytes of 'text'; 50257 with --llmc)");
  app.add_option("--tokenizer", tokenizer, "Tokenizer name recorded with --vocab (default: bytes)");
  app.add_option("--separator", separator, "Document separator token with --vocab (bytes: 0)");
  app.add_option("--available-by", available_by, "A snapshot as of RFC 3339 time T: JSONL documents available after T "
                                                  "are left out (counted as not_yet_available, not rejected)");
  app.add_option("--skip-bad", skip_bad, "Write rejected lines with reasons to FILE and continue");
  app.add_option("--progress-interval", o.progress_interval_s, "Seconds between progress lines on stderr (0: none)")
      ->capture_default_str();
  CLI::Option* synthetic_option = app.add_option("--synthetic", synthetic, "Generate a corpus instead of reading input: 'markov'")
      ->check(CLI::IsMember({"markov"}));
  // The generator's options need --synthetic (without it they were ignored, whatever their value).
  // Its ranges are checked by the generator, whose refusal names them ("--symbols must be in [2,
  // 65535]"): negative values go to that check rather than run_tool's general one (tool/numbers.hpp).
  shardtrain::allow_negative(app.add_option("--symbols", markov.symbols, "--synthetic: Markov states, 2 to 65535 (vocab = symbols + 1; 50256: GPT-2's 50257)")->capture_default_str())
      ->needs(synthetic_option);
  shardtrain::allow_negative(app.add_option("--successors", markov.extra_successors, "--synthetic: random successors per state besides i+1, 0 to 64 (and below --symbols)")
      ->capture_default_str())
      ->needs(synthetic_option);
  app.add_option("--seed", markov.seed, "--synthetic: seed")->capture_default_str()->needs(synthetic_option);
  app.add_option("--documents", markov.documents, "--synthetic: documents")->capture_default_str()->needs(synthetic_option);
  app.add_option("--doc-tokens", markov.tokens_per_document, "--synthetic: tokens per document")->capture_default_str()
      ->needs(synthetic_option);
  app.add_option("--synthetic-jsonl", synthetic_jsonl, "--synthetic: also write the corpus as data-prep JSONL")
      ->needs(synthetic_option);
  shardtrain::add_version_flag(app);

  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    nlohmann::json summary;
    if (!synthetic.empty()) {
      if (!o.jsonl_inputs.empty() || !o.text_inputs.empty() || !o.llmc_inputs.empty() || !fortunes.empty())
        throw shardtrain::UsageError("--synthetic generates its corpus: give no input files, --text, --llmc or --fortunes");
      summary = data::write_markov_dataset(o.output, markov).to_json();
      if (!synthetic_jsonl.empty()) summary["jsonl"] = data::write_markov_jsonl(synthetic_jsonl, markov).output;
    } else {
      if (!fortunes.empty()) {
        if (fortunes_jsonl.empty()) fortunes_jsonl = std::filesystem::path(o.output).replace_extension(".jsonl").string();
        const data::FortunesJsonl f = data::write_fortunes_jsonl(fortunes, fortunes_jsonl);
        std::cerr << "data-prep: " << f.documents << " fortunes from " << f.files << " files -> " << f.output << std::endl;
        o.jsonl_inputs.push_back(f.output);
      }
      if (!owner.empty()) o.text.owner = owner;
      if (!event_time.empty()) o.text.event_time = event_time;
      if (!available_time.empty()) o.text.available_time = available_time;
      if (vocab != 0) o.vocab = vocab;
      if (!tokenizer.empty()) o.tokenizer = tokenizer;
      if (separator >= 0) o.separator = separator;
      if (!skip_bad.empty()) o.skip_bad = skip_bad;
      if (!available_by.empty()) o.available_by = available_by;
      summary = data::run_data_prep(o).to_json();
    }
    std::cout << summary.dump(2) << std::endl;
    return 0;
  });
}
