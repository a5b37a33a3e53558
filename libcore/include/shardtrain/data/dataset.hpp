// Dataset file: the HDF5 token dataset that data-prep writes and the trainers read.
//
// One file holds a token stream, a document table, an owner table, a source table and attributes
// (the full layout is in docs/FORMATS.md and shardtrain-dataset(5)):
//
//   /                       attributes: format="shardtrain-dataset", format_version=1, vocab,
//                           tokenizer, separator_token, token_bits, num_documents, num_tokens,
//                           snapshot_id, created_by; optional extras (entropy_nats_per_token, ...)
//   /tokens                 (num_tokens,) uint8 | uint16 | uint32: the smallest type holding vocab-1;
//                           chunked, shuffle+deflate(1); documents back to back, NO separators stored
//   /documents/id           (D,) variable-length UTF-8 string
//   /documents/version      (D,) int64
//   /documents/offset       (D,) uint64, first token of the document in /tokens
//   /documents/length       (D,) uint64, tokens
//   /documents/event_time   (D,) int64, unix seconds UTC (RFC 3339 input, fraction truncated)
//   /documents/available_time (D,) int64, unix seconds UTC, >= event_time
//   /documents/owner        (D,) uint32, row of /owners/name
//   /documents/token_sha256 (D, 32) uint8: SHA-256 of the document's tokens as stored
//                           (little-endian, token_bits/8 bytes per token)
//   /owners/name            (O,) variable-length string, in order of first appearance
//   /sources/path, /sources/sha256 (hex), /sources/bytes: every input file data-prep read
//
// Separator: the separator token is NOT stored in /tokens; readers insert it between documents when
// they concatenate them (selection.hpp). No document contains it (data-prep rejects such input).
// With the byte tokenizer (vocab 256) the separator is byte 0 (NUL), so text with a NUL is rejected.
//
// snapshot_id: lowercase hex SHA-256 over "shardtrain-dataset-v1\n", "vocab=<V>\n",
// "separator=<S>\n", then for every document in file order: id, '\0', decimal version, '\0',
// the 32 raw bytes of token_sha256. File order matters because it fixes the sample order.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/time.hpp"
#include <string>
#include <utility>
#include <vector>

namespace shardtrain::data {

// ---- format constants -------------------------------------------------------------------------
inline constexpr const char* kDatasetFormatName = "shardtrain-dataset";
inline constexpr int kDatasetFormatVersion = 1;
inline constexpr int64_t kByteVocab = 256;           // vocab of the "bytes" tokenizer
inline constexpr int64_t kByteSeparator = 0;         // separator token of the "bytes" tokenizer (NUL)
inline constexpr const char* kByteTokenizer = "bytes";
inline constexpr uint64_t kTokenChunkElements = 1u << 20;   // /tokens chunk: 1 Mi tokens
inline constexpr uint64_t kTableChunkRows = 1u << 14;       // /documents/* chunk: 16 Ki rows
inline constexpr int kDeflateLevel = 1;

// ---- records --------------------------------------------------------------------------------
// One row of the document table.
struct DocumentRecord {
  std::string id;
  int64_t version = 0;
  uint64_t offset = 0;          // first token in /tokens
  uint64_t length = 0;          // tokens
  int64_t event_time = 0;       // unix seconds UTC
  int64_t available_time = 0;   // unix seconds UTC
  uint32_t owner = 0;           // row of the owner table
  Sha256Digest token_sha256{};  // hash of the stored tokens (see header comment)
};

struct SourceRecord {
  std::string path;
  std::string sha256_hex;  // of the file's bytes
  uint64_t bytes = 0;
};

// File-level attributes.
struct DatasetHeader {
  int format_version = kDatasetFormatVersion;
  int64_t vocab = kByteVocab;
  std::string tokenizer = kByteTokenizer;
  int64_t separator_token = kByteSeparator;
  int token_bits = 8;           // 8, 16 or 32: width of /tokens
  uint64_t num_documents = 0;
  uint64_t num_tokens = 0;      // stored tokens (no separators)
  std::string snapshot_id;      // hex SHA-256, see header comment
  std::string created_by;       // code version of the writer
};

// Smallest stored width (8, 16, 32 bits) for tokens in [0, vocab). Throws UsageError if vocab is
// not in [1, 2^32].
int token_bits_for_vocab(int64_t vocab);

// Feeds one document's key into h: id, '\0', decimal version, '\0', the 32 raw bytes of its
// token_sha256. Both snapshot ids depend on this exact encoding: the dataset snapshot id (header
// comment) and the selection snapshot id (selection.hpp).
void hash_document_key(Sha256& h, const std::string& id, int64_t version, const Sha256Digest& token_sha256);

// The dataset snapshot id of documents in file order (formula in the header comment).
std::string compute_dataset_snapshot_id(int64_t vocab, int64_t separator,
                                        const std::vector<DocumentRecord>& documents);

// ---- writer ---------------------------------------------------------------------------------
// Streams documents into a new dataset file with memory bounded by its buffers (about 2 MiB of
// tokens and kTableChunkRows table rows), independent of corpus size. Writes to "<path>.tmp.<pid>"
// and renames onto <path> in finish(), so a reader never sees a half-written file; a writer
// destroyed without finish() removes the temporary file.
class DatasetWriter {
 public:
  DatasetWriter(const std::string& path, int64_t vocab, const std::string& tokenizer,
                int64_t separator_token);
  ~DatasetWriter();
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // Appends a document. meta.offset/length/owner/token_sha256 are filled in by the writer; the
  // owner is given by name. The caller has validated tokens (< vocab, != separator) and times.
  void add_document(const std::string& id, int64_t version, int64_t event_time,
                    int64_t available_time, const std::string& owner,
                    std::span<const uint8_t> byte_tokens);
  void add_document(const std::string& id, int64_t version, int64_t event_time,
                    int64_t available_time, const std::string& owner,
                    std::span<const uint32_t> tokens);
  void add_source(const SourceRecord& source);
  // An extra numeric root attribute (e.g. "entropy_nats_per_token").
  void set_double_attribute(const std::string& name, double value);
  // An extra string root attribute (e.g. "synthetic_spec").
  void set_string_attribute(const std::string& name, const std::string& value);

  uint64_t num_documents() const;
  uint64_t num_tokens() const;
  std::size_t num_owners() const;

  // Flushes, writes tables and attributes, closes, renames. Returns the header written.
  DatasetHeader finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- reader ---------------------------------------------------------------------------------
// Opens a dataset file read-only and loads its header, document, owner and source tables into
// memory (O(documents)); tokens are read on demand. Throws IoError when the file cannot be opened
// and UsageError when it is not a shardtrain dataset of a supported format_version.
// Not thread-safe (HDF5 calls): use from one thread at a time.
class DatasetReader {
 public:
  static DatasetReader open(const std::string& path);
  DatasetReader(DatasetReader&&) noexcept;
  DatasetReader& operator=(DatasetReader&&) noexcept;
  ~DatasetReader();

  const std::string& path() const;
  const DatasetHeader& header() const;
  const std::vector<DocumentRecord>& documents() const;
  const std::vector<std::string>& owners() const;
  const std::vector<SourceRecord>& sources() const;
  std::optional<double> double_attribute(const std::string& name) const;
  std::optional<std::string> string_attribute(const std::string& name) const;

  // Tokens [offset, offset+count) of /tokens, widened to uint32. Throws UsageError when out of range.
  void read_tokens(uint64_t offset, uint64_t count, uint32_t* out) const;
  std::vector<uint32_t> read_document(std::size_t index) const;
  // Same range at the stored width (token_bits/8 bytes per token, host byte order) into out.
  void read_tokens_stored(uint64_t offset, uint64_t count, void* out) const;

 private:
  DatasetReader();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardtrain::data
