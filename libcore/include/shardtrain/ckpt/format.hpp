// Checkpoint format: logical tensors, pieces, the manifest, the write-spreading helper and the
// layout-independent tensor checksum. Full description: docs/FORMATS.md ("Checkpoint") and
// shardtrain-checkpoint(5). Writing: write.hpp; reading/validation: read.hpp; commit,
// `latest`, resume selection and pruning: commit.hpp. ckpt.hpp includes all of them.
//
// On disk (format_version 1):
//
//   <ckpt_dir>/latest                text file: the committed folder's name + "\n" ("step_00000100")
//   <ckpt_dir>/step_<8 digits>/      one committed checkpoint (step = manifest.step)
//       rank_<5 digits>.h5           one per writing rank (every rank of the saving communicator)
//           /pieces/<tensor>/<20-digit element offset>   1-D dataset (count,) of the tensor's dtype:
//                                    the elements [offset, offset+count) of the FLATTENED (row-major)
//                                    logical tensor; attributes offset, tensor_numel (int64)
//       index.h5
//           / attributes             format, format_version, step, tokens_seen, global_batch,
//                                    world_size, code_version, created, manifest (JSON string),
//                                    manifest_sha256
//           /tensors/<tensor>        HDF5 virtual dataset of the LOGICAL shape (row-major), mapping
//                                    every piece (relative source file names, so the folder moves);
//                                    fill value NaN (float types). Attributes shape (int64[]),
//                                    dtype, numel, checksum ("sum64:<16 hex>").
//   <ckpt_dir>/step_<8 digits>.tmp/  a save in progress or an interrupted one: never read
//
// A flat piece that is not a whole number of rows still maps onto the N-d virtual dataset: it is cut
// into at most 2*ndim-1 rectangular blocks (partial first row, whole rows, partial last row, and so
// on per dimension), each a contiguous 1-D source range. So h5py's f['tensors/NAME'][...] has the
// logical shape, and pieces can split tensors anywhere (ZeRO shards cut at arbitrary elements).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/dtype.hpp"
#include "shardtrain/base/json_record.hpp"

namespace shardtrain::ckpt {

inline constexpr const char* kFormatName = "shardtrain-checkpoint";
inline constexpr int kFormatVersion = 1;
inline constexpr const char* kIndexFile = "index.h5";
inline constexpr const char* kLatestFile = "latest";
inline constexpr const char* kChecksumAlgorithm = "sum64";

// Element types a logical tensor may have (dtype.hpp). Stored little-endian IEEE / two's complement.
using shardtrain::DType;
using shardtrain::dtype_from_name;
using shardtrain::dtype_name;
using shardtrain::dtype_size;

// A logical (unsharded) tensor: stable name (contract 3 of docs/ARCHITECTURE.md), row-major shape. Names must be non-empty
// and contain no '/' (they become HDF5 object names). An empty shape is a scalar (numel 1).
struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  DType dtype = DType::kFloat32;
  std::int64_t numel() const;
  std::int64_t bytes() const { return numel() * std::int64_t(dtype_size(dtype)); }
};

// This rank's piece of a logical tensor: elements [offset, offset+count) of the flattened tensor,
// `data` pointing at `count` elements of the tensor's dtype (not owned; must stay valid and
// unchanged while a synchronous save runs; async saves copy, see AsyncCheckpointWriter).
struct PieceView {
  std::string tensor;
  std::int64_t offset = 0;
  std::int64_t count = 0;
  const void* data = nullptr;
};

// A flat range of one logical tensor (index into the tensor list), as assigned by spread_ranges.
struct FlatRange {
  std::size_t tensor = 0;
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

// Writing replicated tensors once, in parallel (DDP: every rank holds every tensor). Concatenates the
// tensors' bytes in list order, cuts that space into `world_size` equal byte ranges (rounded to element
// boundaries) and returns rank `rank`'s share as per-tensor flat ranges, in list order. Each tensor
// element is assigned to exactly one rank; a rank's share is contiguous in the concatenated space, so
// it touches at most (tensors / world + 2) tensors. Deterministic: every rank computes the same split.
std::vector<FlatRange> spread_ranges(const std::vector<TensorSpec>& tensors, int world_size, int rank);

// Convenience for replicated state: rank `rank`'s pieces, given a pointer to each whole tensor (same
// order as `tensors`). E.g. DDP: data[i] = params.data() + registry.tensors()[i].offset.
std::vector<PieceView> spread_pieces(const std::vector<TensorSpec>& tensors, const std::vector<const void*>& data,
                                     int world_size, int rank);

// Layout-independent tensor checksum "sum64": over every element i (flat logical index) of bits v_i
// (the element's bytes as an unsigned little-endian integer, zero-extended to 64 bits),
//     sum64 = SUM_i  m(i) * v_i   (mod 2^64),   m(i) = fmix64(i XOR 0x5348415244434b50) | 1
// (fmix64: MurmurHash3's 64-bit finaliser). A piece contributes the sum over its own elements, so
// pieces from any layout add up to the same value; a change of any single element always changes it
// (m(i) is odd). Not cryptographic: the per-file SHA-256 is the integrity anchor.
std::uint64_t piece_checksum(const void* data, std::int64_t count, DType dtype, std::int64_t offset);
std::string format_checksum(std::uint64_t sum);         // "sum64:<16 lower-case hex>"
std::uint64_t parse_checksum(const std::string& text);  // throws UsageError

// Folder names.
std::string step_folder_name(std::int64_t step);  // "step_00000100"; step in [0, 99999999]
// Parses "step_<8 digits>" exactly (no suffix); returns -1 for anything else.
std::int64_t parse_step_folder_name(const std::string& name);
std::string rank_file_name(int rank);  // "rank_00003.h5"

// One rank file, as recorded in the manifest.
struct FileRecord {
  std::string name;       // relative to the checkpoint folder, e.g. "rank_00003.h5"
  int rank = 0;           // writing rank in the saving communicator
  std::int64_t bytes = 0;
  std::string sha256;     // lower-case hex of the file's bytes
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("name", &FileRecord::name), key("rank", &FileRecord::rank), key("bytes", &FileRecord::bytes),
                      key("sha256", &FileRecord::sha256)};
  }
};

// Parallel layout of the job that wrote the checkpoint (informational: checkpoints store logical
// tensors, so any layout can read them; the trainer refuses a change it cannot handle yet).
struct CheckpointLayout {
  int world_size = 1;
  int dp = 1;
  int tp = 1;
  int zero_stage = 0;  // 0 = DDP (full replicas), 1, 2, 3
  static auto fields() {  // the manifest's "layout", and each history entry's
    using namespace json_fields;
    using L = CheckpointLayout;
    return std::tuple{key("world_size", &L::world_size), key("dp", &L::dp), key("tp", &L::tp),
                      key("zero_stage", &L::zero_stage)};
  }
};

// Everything about the training state except the tensors (contract 5). The trainer fills the
// "trainer" fields; the writer fills format_version, files, writers, created and code_version (if
// empty). All fields are required on read (a missing one names itself); `extra` carries anything else.
// One tensor as the index's tensor table records it: its spec and its sum64 over the whole tensor.
struct TensorTableRow {
  TensorSpec spec;
  std::uint64_t checksum = 0;
};
// SHA-256 (hex) of the rows sorted by name, one line each: "<name> <dtype> <d0,d1,...> <numel>
// sum64:<16 hex digits>\n". What CheckpointManifest::tensor_table_sha256 records.
std::string tensor_table_sha256(std::vector<TensorTableRow> rows);

struct CheckpointManifest {
  int format_version = kFormatVersion;
  std::int64_t step = 0;          // optimizer steps completed: a resume runs step `step` next
  std::int64_t tokens_seen = 0;
  nlohmann::json model = nlohmann::json::object();   // model config (ModelConfig::to_json); must match on resume
  nlohmann::json config = nlohmann::json::object();  // the rest of the run config (informational)
  CheckpointLayout layout;
  std::int64_t global_batch = 0;  // sequences per step (contract 1)
  std::int64_t micro_batch = 0;
  std::int64_t grad_accum = 0;
  std::int64_t sampler_epoch = 0;
  std::int64_t sampler_consumed = 0;  // samples consumed in sampler_epoch
  nlohmann::json rng = nlohmann::json::object();  // RNG state (seed, counters: free-form)
  std::int64_t lr_step = 0;       // LR schedule position (the 0-based step the schedule is at)
  double lr = 0.0;                // the learning rate of the last completed step (informational)
  std::string data_snapshot_id;
  std::string data_cutoff;        // RFC 3339 or empty
  std::string code_version;       // git describe of the writer (default: log.hpp code_version())
  std::string created;            // RFC 3339 UTC, set by the writer
  int writers = 0;                // number of rank files (saving communicator size)
  std::vector<FileRecord> files;  // set by the writer
  nlohmann::json extra = nlohmann::json::object();
  // Earlier layouts of this state, oldest first: one object per rewrite (ckpt-reshard, consolidate)
  // {"operation", "source", "step", "layout": {world_size, dp, tp, zero_stage}, "writers",
  //  "created", "code_version"} describing the checkpoint it was rewritten FROM. Optional on read
  // (absent in checkpoints a trainer wrote: an empty array).
  nlohmann::json history = nlohmann::json::array();
  // SHA-256 (hex) of the index's tensor table (tensor_table_sha256 below), set by the writer: it ties
  // the index, the one file no file hash covers, to this manifest, so validation compares one digest
  // instead of adding up every piece. Layout-independent (the same for any layout of one state).
  // Optional on read: empty in checkpoints written before it (validation then adds up the pieces).
  std::string tensor_table_sha256;

  // Appends the history entry describing this manifest as the source of `operation` at `source`.
  void record_rewrite(const std::string& operation, const std::string& source);

  // The manifest's keys, once: to_json writes them, from_json reads them (all required but history
  // and tensor_table_sha256, newer than the format).
  static auto fields() {
    using namespace json_fields;
    using M = CheckpointManifest;
    return std::tuple{
        format_tag("format", kFormatName, "shardtrain checkpoint"),
        key("format_version", &M::format_version, read_format_version),
        key("step", &M::step), key("tokens_seen", &M::tokens_seen),
        key("model", &M::model, json_fields::object), key("config", &M::config, json_fields::object),
        key("layout", &M::layout),
        key("global_batch", &M::global_batch), key("micro_batch", &M::micro_batch), key("grad_accum", &M::grad_accum),
        group("sampler", key("epoch", &M::sampler_epoch), key("consumed", &M::sampler_consumed)),
        key("rng", &M::rng),
        group("lr_schedule", key("step", &M::lr_step), key("lr", &M::lr)),
        group("data", key("snapshot_id", &M::data_snapshot_id), key("cutoff", &M::data_cutoff)),
        key("code_version", &M::code_version), key("created", &M::created), key("writers", &M::writers),
        key("files", &M::files), key("extra", &M::extra),
        key("history", &M::history, read_history, kMayBeAbsent),
        key("tensor_table_sha256", &M::tensor_table_sha256, kMayBeAbsent)};
  }
  // format_version: kFormatVersion, or refused naming the version and what to do.
  static int read_format_version(const JsonFile& file, const std::string& pointer);
  // history: an array, kept as it is.
  static nlohmann::json read_history(const JsonFile& file, const std::string& pointer);
  // files: one per writer.
  void validate(const JsonFile& file, const std::string& at) const;

  nlohmann::json to_json() const { return json_fields::write(*this); }
  // Throws UsageError "<where>: the checkpoint manifest has no field /sampler/consumed" (or "field
  // /step is not an integer (got ...)").
  static CheckpointManifest from_json(const nlohmann::json& j, const std::string& where = "manifest");
  // The manifest as stored (the `manifest` attribute of index.h5 or of a consolidated file) with
  // the SHA-256 stored beside it: the one reader of that text. IoError naming `where` when the
  // hash does not match (corrupt) or the text is not JSON; from_json's errors otherwise.
  static CheckpointManifest from_stored_text(const std::string& text, const std::string& sha256_hex,
                                             const std::string& where);
};

}  // namespace shardtrain::ckpt
