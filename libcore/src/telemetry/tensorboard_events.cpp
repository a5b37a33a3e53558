#include "shardtrain/telemetry/tensorboard_events.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <boost/crc.hpp>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/host.hpp"
#include "tensorboard_event.pb.h"

namespace shardtrain {
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kMaskDelta = 0xa282ead8u;
constexpr const char* kFileVersion = "brain.Event:2";
constexpr std::size_t kHeaderBytes = 8 + 4;  // length, its masked CRC
constexpr std::size_t kFooterBytes = 4;      // the payload's masked CRC
// A step's record is a few hundred bytes; a length past this is not one of ours, and not a torn
// tail either (the length's own CRC matched): refused rather than read as a giant payload.
constexpr std::uint64_t kMaxRecordBytes = std::uint64_t(1) << 30;

// Boost.CRC's Castagnoli CRC: polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value and final
// xor all ones, input and output reflected.
using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(in[at + std::size_t(i)])) << (8 * i);
  return v;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string error_text(int err) { return std::strerror(err); }

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot read the TensorBoard event file (missing file or permission?)");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw IoError(path + ": reading the TensorBoard event file failed");
  return std::move(bytes).str();
}

bool is_event_file_name(const std::string& name) { return name.find("tfevents") != std::string::npos; }
bool is_rewrite_temporary(const std::string& name) {
  return name.rfind(".rewrite.", 0) == 0 && name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
}

// The <unix seconds> of an event file's name (events.out.tfevents.<seconds>....), or -1.
std::int64_t seconds_in_name(const std::string& name) {
  static const std::string prefix = "events.out.tfevents.";
  if (name.rfind(prefix, 0) != 0) return -1;
  std::int64_t s = 0;
  std::size_t i = prefix.size();
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && s < (std::int64_t(1) << 40); ++i)
    s = s * 10 + (name[i] - '0');
  return s;
}

}  // namespace

std::uint32_t crc32c(std::string_view bytes) {
  Crc32c crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + kMaskDelta;
}

std::string frame_event_record(std::string_view payload) {
  std::string out;
  out.reserve(kHeaderBytes + payload.size() + kFooterBytes);
  put_le(out, payload.size(), 8);
  put_le(out, masked_crc32c(std::string_view(out.data(), 8)), 4);
  out.append(payload);
  put_le(out, masked_crc32c(payload), 4);
  return out;
}

std::string serialize_scalar_event(double wall_time, std::int64_t step, const std::vector<TensorBoardScalar>& scalars) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const TensorBoardScalar& s : scalars) {
    tensorboard::Summary::Value* v = summary->add_value();
    v->set_tag(s.tag);
    v->set_simple_value(s.value);
  }
  return event.SerializeAsString();
}

TensorBoardEventFile read_tensorboard_event_file(const std::string& path) {
  const std::string bytes = read_whole(path);
  TensorBoardEventFile file;
  file.path = path;
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::string where = path + ": byte " + std::to_string(at) + ": ";
    const std::size_t left = bytes.size() - at;
    if (left < kHeaderBytes) {  // cut inside the length or its CRC
      file.torn_tail = true;
      break;
    }
    const std::uint64_t length = get_le(bytes, at, 8);
    if (std::uint32_t(get_le(bytes, at + 8, 4)) != masked_crc32c(std::string_view(bytes).substr(at, 8)))
      throw UsageError(where + "the record's length fails its CRC-32C (not a TensorBoard event file, or corrupt)");
    if (length > kMaxRecordBytes)
      throw UsageError(where + "a record of " + std::to_string(length) + " bytes (not one of the trainer's events)");
    if (left - kHeaderBytes < length + kFooterBytes) {  // cut inside the payload or its CRC
      file.torn_tail = true;
      break;
    }
    const std::string_view payload = std::string_view(bytes).substr(at + kHeaderBytes, std::size_t(length));
    if (std::uint32_t(get_le(bytes, at + kHeaderBytes + std::size_t(length), 4)) != masked_crc32c(payload))
      throw UsageError(where + "the record's payload fails its CRC-32C (corrupt event file)");
    tensorboard::Event event;
    if (!event.ParseFromArray(payload.data(), int(payload.size())))
      throw UsageError(where + "the record is not a tensorboard.Event message");
    TensorBoardEvent e;
    e.wall_time = event.wall_time();
    e.step = event.step();
    e.file_version = event.file_version();
    for (const tensorboard::Summary::Value& v : event.summary().value()) e.scalars.push_back({v.tag(), v.simple_value()});
    file.events.push_back(std::move(e));
    file.payloads.emplace_back(payload);
    at += kHeaderBytes + std::size_t(length) + kFooterBytes;
  }
  return file;
}

std::vector<std::string> find_tensorboard_event_files(const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::exists(folder, ec)) return files;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_event_file_name(name) && entry.is_regular_file()) files.push_back(entry.path().string());
  }
  if (ec) throw IoError(folder + ": cannot list the TensorBoard folder (" + ec.message() + ")");
  std::sort(files.begin(), files.end());
  return files;
}

TensorBoardTruncation keep_tensorboard_steps_before(const std::string& folder, std::int64_t first_step) {
  TensorBoardTruncation result;
  std::error_code ec;
  if (!fs::exists(folder, ec)) return result;
  // A rewrite's temporary left by a rank killed during it: the original file is still whole.
  for (const auto& entry : fs::directory_iterator(folder, ec))
    if (is_rewrite_temporary(entry.path().filename().string())) fs::remove(entry.path(), ec);
  for (const std::string& path : find_tensorboard_event_files(folder)) {
    const TensorBoardEventFile file = read_tensorboard_event_file(path);
    std::string kept;
    int kept_steps = 0, dropped = 0;
    for (std::size_t i = 0; i < file.events.size(); ++i) {
      const TensorBoardEvent& e = file.events[i];
      const bool version_record = !e.file_version.empty();
      if (!version_record && e.step >= first_step) {
        ++dropped;
        continue;
      }
      kept_steps += version_record ? 0 : 1;
      kept += frame_event_record(file.payloads[i]);
    }
    result.records_dropped += dropped;
    result.torn_tails += file.torn_tail ? 1 : 0;
    if (dropped == 0 && !file.torn_tail) continue;
    if (kept_steps == 0) {
      if (!fs::remove(path, ec) || ec)
        throw IoError(path + ": cannot remove the TensorBoard event file (" + ec.message() + ")");
      ++result.files_removed;
      continue;
    }
    const std::string temporary = folder + "/.rewrite." + std::to_string(getpid()) + ".tmp";
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out.write(kept.data(), std::streamsize(kept.size()));
      out.close();
      if (!out) {
        fs::remove(temporary, ec);
        throw IoError(temporary + ": cannot write the rewritten TensorBoard event file (disk full or permission?)");
      }
    }
    commit_file_atomically(temporary, path);
    ++result.files_rewritten;
  }
  return result;
}

std::vector<TensorBoardScalar> tensorboard_step_scalars(const StepRecord& r, bool job_scalars) {
  std::vector<TensorBoardScalar> out = {{"time/data_s", float(r.data_s)},
                                        {"time/compute_s", float(compute_seconds(r))},
                                        {"time/comm_exposed_s", float(r.comm_exposed_s)}};
  if (job_scalars) {
    out.push_back({"train/loss", float(r.loss)});
    out.push_back({"train/learning_rate", float(r.lr)});
    out.push_back({"train/grad_norm", float(r.grad_norm)});
    out.push_back({"train/tokens_per_s", float(r.tokens_per_s)});
    out.push_back({"train/mfu", float(r.mfu)});
  }
  if (r.extra.is_object())
    if (const auto h = r.extra.find("holdout_loss"); h != r.extra.end() && h->is_number())
      out.push_back({"eval/holdout_loss", float(h->get<double>())});
  return out;
}

std::string tensorboard_event_file_name(std::int64_t unix_seconds, const std::string& host, long pid, int rank) {
  return "events.out.tfevents." + std::to_string(unix_seconds) + "." + host + "." + std::to_string(pid) + "." +
         std::to_string(rank);
}

TensorBoardEventWriter::TensorBoardEventWriter(const std::string& folder, int rank) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw IoError(folder + ": cannot create the TensorBoard folder (" + ec.message() + ")");
  std::int64_t seconds = std::int64_t(std::floor(unix_now()));
  for (const std::string& path : find_tensorboard_event_files(folder))
    seconds = std::max(seconds, seconds_in_name(fs::path(path).filename().string()) + 1);
  path_ = folder + "/" + tensorboard_event_file_name(seconds, host_name(), long(getpid()), rank);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError(path_ + ": cannot create the TensorBoard event file (" + error_text(errno) + ")");
  tensorboard::Event version;
  version.set_wall_time(unix_now());
  version.set_file_version(kFileVersion);
  append(frame_event_record(version.SerializeAsString()));
}

TensorBoardEventWriter::~TensorBoardEventWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardEventWriter::write_step(std::int64_t step, const std::vector<TensorBoardScalar>& scalars) {
  append(frame_event_record(serialize_scalar_event(unix_now(), step, scalars)));
}

void TensorBoardEventWriter::append(const std::string& record) {
  std::size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw IoError(path_ + ": writing the TensorBoard event file failed (" +
                    (n < 0 ? error_text(errno) : std::string("nothing written")) + ")");
    done += std::size_t(n);
  }
}

}  // namespace shardtrain
