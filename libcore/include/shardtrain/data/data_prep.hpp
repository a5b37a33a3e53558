// data-prep: documents (JSONL, plain text files or folders) -> one HDF5 dataset file (dataset.hpp).
//
// JSONL input: one JSON object per line (blank lines are skipped; a trailing '\r' is dropped):
//   id              string, non-empty
//   version         integer (int64)
//   owner           string, non-empty
//   event_time      RFC 3339 date-time string (when the document happened)
//   available_time  RFC 3339 date-time string, not before event_time (when the trainer could see it)
//   text            UTF-8 string, tokenised as bytes (dataset vocab 256, tokenizer "bytes"), or
//   tokens          array of integers in [0, vocab) (pre-tokenised; needs --vocab/--tokenizer/--separator)
// Exactly one of text/tokens. Other fields are ignored. Rejected, each with its class:
//   malformed_json, missing_field, mistyped_field (also: both or neither of text/tokens, text with a
//   non-bytes vocab), bad_time, available_before_event, duplicate_id_version (a repeated
//   (id, version): the later line is rejected), token_out_of_vocab, separator_in_document (text with
//   a NUL byte, or tokens containing the separator token).
// By default the first rejected line stops the run with UsageError "FILE:LINE: reason". With
// skip_bad set, every reject is written there as one JSON line {"file","line","class","reason",
// "input"} and counted in the summary; the run continues.
//
// Text input (--text PATH, a file or a folder searched recursively in sorted path order; hidden
// entries skipped): each file is one document with the bytes tokenizer. id = the path as given
// (file) or relative to the folder (folder); version = text.version (default 1); owner = text.owner
// or, by default, the file's name; event_time = text.event_time or, by default, the file's
// modification time; available_time = text.available_time or, by default, event_time.
//
// llm.c token shards (--llmc PATH, repeatable; llmc_shard.hpp): each document of a shard (the tokens
// between end-of-text separators) is one document, tokens unchanged. Vocabulary 50,257, tokenizer
// "gpt2", separator 50,256 unless --vocab/--tokenizer/--separator say otherwise (a token outside
// the vocabulary is a token_out_of_vocab reject of that document). id = "<path as given>:<k>" (k the
// 0-based document index in the shard); version, owner (default: the file's name), event_time
// (default: the file's modification time) and available_time as for --text.
//
// Streaming: JSONL is read in 4 MiB blocks and written through DatasetWriter, so memory is bounded by
// the buffers, the longest line, and 8 bytes per document for the duplicate check (a 64-bit hash of
// (id, version); a hash collision, probability ~D^2/2^65 for D documents, would reject a line as a
// duplicate). A text file is read whole. Progress lines ("[rank 0/1] data-prep: ...") go to stderr
// every progress_interval_s seconds.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"

namespace shardtrain::data {

struct TextInputOptions {
  std::optional<std::string> owner;
  std::optional<std::string> event_time;      // RFC 3339
  std::optional<std::string> available_time;  // RFC 3339
  int64_t version = 1;
};

struct DataPrepOptions {
  std::vector<std::string> jsonl_inputs;  // files; "-" reads standard input
  std::vector<std::string> text_inputs;   // files or folders
  std::vector<std::string> llmc_inputs;   // llm.c token shards (.bin)
  TextInputOptions text;                  // --text and --llmc documents
  std::string output;                     // dataset file to create (replaced atomically)
  std::optional<int64_t> vocab;           // absent: 256 (bytes), 50257 with --llmc; given: tokenizer and separator required
  std::optional<std::string> tokenizer;   // absent: "bytes"
  std::optional<int64_t> separator;       // absent: 0 (bytes)
  std::optional<std::string> skip_bad;    // rejects file; absent: the first bad line is an error
  // A snapshot as of this time (RFC 3339): a valid document whose available_time is later has not
  // arrived yet; it is left out (not a reject) and counted as not_yet_available. Absent: everything.
  std::optional<std::string> available_by;
  double progress_interval_s = 2.0;       // <= 0: no progress lines
};

// Root string attribute of every dataset data-prep writes: its transformation state as JSON,
// {"code_version", "options": {the options above, inputs included}, "rejects": count of skipped
// lines} (release-gate records it; a dataset without it was written by another writer).
inline constexpr const char* kDataPrepAttribute = "data_prep";

// What a data-prep run wrote: the summary the tool prints as JSON (and the pipeline tool keeps as the
// release evidence evidence/data-prep.json; docs/FORMATS.md).
struct DataPrepResult {
  std::string output;                          // the dataset file
  std::uint64_t documents = 0, tokens = 0;     // stored documents and tokens (no separators)
  std::uint64_t owners = 0;
  std::int64_t vocab = 0, separator_token = 0;
  std::string tokenizer;
  int token_bits = 8;
  // RFC 3339 bounds of the documents' times; none when no document had one.
  std::optional<std::string> event_time_min, event_time_max, available_time_min, available_time_max;
  std::string snapshot_id;                     // the dataset's (dataset.hpp)
  std::uint64_t rejects = 0;                   // input lines skipped (--skip-bad)
  std::optional<std::string> rejects_file;     // where they were written (--skip-bad FILE)
  std::map<std::string, std::uint64_t> rejects_by_class;
  std::optional<std::string> available_by;     // the snapshot's time (--available-by); none: everything
  std::uint64_t not_yet_available = 0;         // valid documents left out for arriving after it
  struct Source {
    std::string path, sha256;                  // sha256: of the file's bytes, hex
    std::uint64_t bytes = 0;
    static auto fields() {
      using namespace json_fields;
      return std::tuple{key("path", &Source::path), key("sha256", &Source::sha256), key("bytes", &Source::bytes)};
    }
    bool operator==(const Source&) const = default;
  };
  std::vector<Source> sources;
  std::uint64_t input_bytes = 0;
  double seconds = 0, mb_per_s = 0;            // wall time; input MB (10^6 bytes) per second
  std::string code_version;

  bool operator==(const DataPrepResult&) const = default;
  // The keys, once ("available_by" and "not_yet_available" are absent in summaries before
  // snapshots: null and 0).
  static auto fields() {
    using namespace json_fields;
    using R = DataPrepResult;
    return std::tuple{
        key("output", &R::output), key("documents", &R::documents), key("tokens", &R::tokens), key("owners", &R::owners),
        key("vocab", &R::vocab), key("tokenizer", &R::tokenizer), key("separator_token", &R::separator_token),
        key("token_bits", &R::token_bits),
        group("event_time", key("min", &R::event_time_min, kMayBeAbsent), key("max", &R::event_time_max, kMayBeAbsent)),
        group("available_time", key("min", &R::available_time_min, kMayBeAbsent),
              key("max", &R::available_time_max, kMayBeAbsent)),
        key("snapshot_id", &R::snapshot_id),
        group("rejects", key("count", &R::rejects), key("file", &R::rejects_file, kMayBeAbsent),
              key("by_class", &R::rejects_by_class)),
        key("available_by", &R::available_by, kMayBeAbsent), key("not_yet_available", &R::not_yet_available, kMayBeAbsent),
        key("sources", &R::sources), key("input_bytes", &R::input_bytes), key("seconds", &R::seconds),
        key("mb_per_s", &R::mb_per_s), key("code_version", &R::code_version)};
  }
  // json_fields::write and read over fields(), for callers that name the type's own pair.
  nlohmann::json to_json() const;
  // Throws UsageError naming the file and the field (JsonFile's rule).
  static DataPrepResult from_json(const JsonFile& file);
};

// Runs data-prep. Throws UsageError (bad options, a bad input line without skip_bad, no valid
// document) or IoError.
DataPrepResult run_data_prep(const DataPrepOptions& options);

}  // namespace shardtrain::data
