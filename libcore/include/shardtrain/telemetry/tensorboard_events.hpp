// TensorBoard event files (issue 49): the writer every training rank uses, the one reader of the
// format in shardtrain, and the truncation a resumed run applies (docs/FORMATS.md "TensorBoard
// event files").
//
// The format, from its published description:
//   * a file is a sequence of records, each framed as
//       uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//       payload (length bytes)        | uint32 masked CRC-32C of the payload
//     (both CRCs little-endian), where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32)
//     and CRC-32C is the Castagnoli CRC (reflected polynomial 0x82F63B78, initial value and final
//     xor 0xFFFFFFFF; the CRC-32C of "123456789" is 0xE3069283);
//   * each payload is a serialized tensorboard.Event (libcore/src/telemetry/tensorboard_event.proto,
//     compiled by Debian's protobuf): the first record of a file carries file_version
//     "brain.Event:2", every later one a step and a Summary of scalar values (tag, float).
// File names are what TensorBoard looks for: events.out.tfevents.<unix seconds>.<host>.<pid>.<rank>.
// TensorBoard reads a folder's event files in name order, so one folder's files are named in the
// order they were opened (see TensorBoardEventWriter).
//
// Errors: IoError naming the file for a file that cannot be read, created or written; UsageError
// naming the file and byte offset for a file that is not a sequence of valid records.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain {

// CRC-32C (Castagnoli) of `bytes`, and its masked form as the record framing stores it.
std::uint32_t crc32c(std::string_view bytes);
std::uint32_t masked_crc32c(std::string_view bytes);

// One record of an event file around `payload`: length, its masked CRC, payload, its masked CRC.
std::string frame_event_record(std::string_view payload);

// A scalar of a step: TensorBoard's tag (e.g. "train/loss") and its value, stored as float
// (a double given to the writer is rounded to the nearest float).
struct TensorBoardScalar {
  std::string tag;
  float value = 0;
  bool operator==(const TensorBoardScalar&) const = default;
};

// One event as read back: the file-version record (file_version set, no scalars), or a step's
// scalars (file_version empty).
struct TensorBoardEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;
  std::vector<TensorBoardScalar> scalars;
};

// The serialized tensorboard.Event of a step's scalars (the payload frame_event_record wraps).
std::string serialize_scalar_event(double wall_time, std::int64_t step, const std::vector<TensorBoardScalar>& scalars);

// An event file read back, every record's two CRCs checked:
//   * a last record cut short (the file ends inside its length, CRCs or payload: a rank killed
//     while appending, or a disk that filled) is dropped and reported in `torn_tail`;
//   * anything else (a CRC that does not match, a payload that is not an Event, a length past any
//     sane record) is a UsageError "FILE: byte OFFSET: ..." naming what is wrong.
struct TensorBoardEventFile {
  std::string path;
  std::vector<TensorBoardEvent> events;
  std::vector<std::string> payloads;  // each event's record payload as stored (a rewrite copies them)
  bool torn_tail = false;
};
TensorBoardEventFile read_tensorboard_event_file(const std::string& path);

// The event files of `folder` (names containing "tfevents", as TensorBoard takes them), in name
// order; empty when the folder does not exist. IoError when it cannot be listed.
std::vector<std::string> find_tensorboard_event_files(const std::string& folder);

// What keep_tensorboard_steps_before changed in a folder.
struct TensorBoardTruncation {
  int files_rewritten = 0;  // files that lost records (rewritten atomically)
  int files_removed = 0;    // files left with no step record (removed)
  int records_dropped = 0;  // step records at or past the first step
  int torn_tails = 0;       // torn last records dropped
};
// The restart rule: every event file of `folder` keeps its file-version record and its step
// records with step < first_step, in their order, and loses the rest (a torn last record too).
// A file that changes is rewritten to a temporary in the folder and renamed over itself (a
// reader sees the old file or the new one); a file left with no step record is removed. A
// malformed file is a UsageError naming it (the folder is left as it was from that file on).
TensorBoardTruncation keep_tensorboard_steps_before(const std::string& folder, std::int64_t first_step);

// "events.out.tfevents.<unix_seconds>.<host>.<pid>.<rank>".
std::string tensorboard_event_file_name(std::int64_t unix_seconds, const std::string& host, long pid, int rank);

// The scalars of a step as the trainers log them, every value taken from the step record the step
// log writes (so each equals its step-log field rounded to float):
//   every rank, its own times of the step:
//     time/data_s          data_s
//     time/compute_s       fwd_s + bwd_s + opt_s (compute_seconds)
//     time/comm_exposed_s  comm_exposed_s
//   `job_scalars` (rank 0), the job's values:
//     train/loss           loss
//     train/learning_rate  lr
//     train/grad_norm      grad_norm
//     train/tokens_per_s   tokens_per_s
//     train/mfu            mfu
//   any rank whose record holds a hold-out evaluation (rank 0, on evaluation steps):
//     eval/holdout_loss    holdout_loss
std::vector<TensorBoardScalar> tensorboard_step_scalars(const StepRecord& record, bool job_scalars);

// Appends a rank's events to a new file in `folder` (created with its parents), opened in the
// constructor with its file-version record written. Its name's seconds are the current time, or
// one past the newest seconds already in the folder when that is not earlier, so that the new file
// sorts after every older one and TensorBoard reads the attempts in order.
// Each write_step appends the step's one record with a single write(2) (nothing buffered in the
// process: a killed rank keeps every step it logged, the last one at worst torn). IoError naming
// the file when it cannot be created or written (a full disk: ENOSPC).
class TensorBoardEventWriter {
 public:
  TensorBoardEventWriter(const std::string& folder, int rank);
  ~TensorBoardEventWriter();
  TensorBoardEventWriter(const TensorBoardEventWriter&) = delete;
  TensorBoardEventWriter& operator=(const TensorBoardEventWriter&) = delete;

  void write_step(std::int64_t step, const std::vector<TensorBoardScalar>& scalars);
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& record);
  std::string path_;
  int fd_ = -1;
};

}  // namespace shardtrain
