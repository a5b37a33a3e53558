// TensorBoard event files (issue 49; telemetry/tensorboard_events.hpp): CRC-32C against its
// published check values, the record framing byte for byte, a round trip through the writer and
// the reader, a torn last record, a corrupt one, the restart rule's truncation, file-name order,
// and the scalars a step record gives. TensorBoard's own reader reads what the trainers write in
// the e2e test tests/scripts/tensorboard_events.sh.
#include <sys/mount.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/telemetry/tensorboard_events.hpp"
#include "test_support.hpp"

using namespace shardtrain;
namespace fs = std::filesystem;

namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string hex_of(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

// The step numbers of a file's step records, in file order.
std::vector<std::int64_t> steps_in(const std::string& path) {
  std::vector<std::int64_t> steps;
  for (const TensorBoardEvent& e : read_tensorboard_event_file(path).events)
    if (e.file_version.empty()) steps.push_back(e.step);
  return steps;
}

std::vector<TensorBoardScalar> scalars_of_step(std::int64_t step) {
  return {{"train/loss", 3.0f - 0.125f * float(step)}, {"time/data_s", 0.001f * float(step + 1)}};
}

// A writer's file in `folder` holding steps [first, last].
std::string write_steps(const std::string& folder, std::int64_t first, std::int64_t last, int rank = 0) {
  TensorBoardEventWriter writer(folder, rank);
  for (std::int64_t s = first; s <= last; ++s) writer.write_step(s, scalars_of_step(s));
  return writer.path();
}

}  // namespace

TEST_CASE("tensorboard events: CRC-32C and its mask against the published check values", "[tensorboard]") {
  CHECK(crc32c("123456789") == 0xE3069283u);            // the CRC catalogue's check value of CRC-32C
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros
  CHECK(crc32c(std::string(32, '\xff')) == 0x62A8AB43u);  // and 32 bytes of ones
  CHECK(crc32c("") == 0u);
  // masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32); for 0xE3069283 the rotation is
  // 0x2507C60D and the sum 0xC78AB0E5.
  const std::uint32_t c = 0xE3069283u;
  CHECK(masked_crc32c("123456789") == std::uint32_t(((c >> 15) | (c << 17)) + 0xa282ead8u));
  CHECK(masked_crc32c("123456789") == 0xC78AB0E5u);
}

TEST_CASE("tensorboard events: a record's framing, byte for byte", "[tensorboard]") {
  // Reference bytes from a bitwise CRC-32C (reflected polynomial 0x82F63B78, one bit at a time,
  // written apart from Boost's table-driven one): length 3 little-endian, masked CRC of those 8
  // bytes, "abc", masked CRC of "abc".
  CHECK(hex_of(frame_event_record("abc")) == "0300000000000000b099490e6162636e57f121");
  const std::string empty = frame_event_record("");
  CHECK(empty.size() == 16);
}

TEST_CASE("tensorboard events: what the writer writes reads back, the file version first", "[tensorboard]") {
  const std::string dir = test::temp_dir("tb-roundtrip") + "/rank_3";  // created by the writer
  const std::string path = write_steps(dir, 0, 4, 3);
  CHECK(std::regex_match(fs::path(path).filename().string(), std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+\.3)")));
  CHECK(find_tensorboard_event_files(dir) == std::vector<std::string>{path});
  const TensorBoardEventFile file = read_tensorboard_event_file(path);
  CHECK_FALSE(file.torn_tail);
  REQUIRE(file.events.size() == 6);
  CHECK(file.events[0].file_version == "brain.Event:2");
  CHECK(file.events[0].scalars.empty());
  for (std::int64_t s = 0; s <= 4; ++s) {
    const TensorBoardEvent& e = file.events[std::size_t(s) + 1];
    CHECK(e.step == s);
    CHECK(e.file_version.empty());
    CHECK(e.scalars == scalars_of_step(s));  // floats, exactly
    CHECK(e.wall_time > 1.6e9);
  }
}

TEST_CASE("tensorboard events: a torn last record is dropped, a corrupt one named", "[tensorboard]") {
  const std::string dir = test::temp_dir("tb-torn");
  const std::string path = write_steps(dir, 0, 2);
  const std::string whole = bytes_of(path);
  const std::string next = frame_event_record(serialize_scalar_event(1.7e9, 3, scalars_of_step(3)));
  // Cut anywhere inside the next record (its length, its CRCs, its payload): the three steps read
  // back, the tail is reported torn.
  for (std::size_t cut = 1; cut < next.size(); ++cut) {
    write_bytes(path, whole + next.substr(0, cut));
    const TensorBoardEventFile file = read_tensorboard_event_file(path);
    CHECK(file.torn_tail);
    CHECK(steps_in(path) == std::vector<std::int64_t>{0, 1, 2});
  }
  // A flipped byte in a whole record's payload, or in a length: an error naming the file and where.
  std::string flipped = whole + next;
  flipped[whole.size() + 14] ^= 0x01;
  write_bytes(path, flipped);
  CHECK_THROWS_AS(read_tensorboard_event_file(path), UsageError);
  CHECK_THROWS_WITH(read_tensorboard_event_file(path),
                    Catch::Contains(path) && Catch::Contains("byte " + std::to_string(whole.size())) &&
                        Catch::Contains("payload fails its CRC-32C"));
  flipped = whole + next;
  flipped[whole.size()] ^= 0x40;
  write_bytes(path, flipped);
  CHECK_THROWS_WITH(read_tensorboard_event_file(path), Catch::Contains("length fails its CRC-32C"));
  write_bytes(path, "{\"step\": 0, \"loss\": 1.5}\n{\"step\": 1}\n");  // not an event file at all
  CHECK_THROWS_AS(read_tensorboard_event_file(path), UsageError);
  // A record whose CRCs hold but whose payload is not an Event.
  write_bytes(path, frame_event_record(std::string("\xff\xff\xff", 3)));
  CHECK_THROWS_WITH(read_tensorboard_event_file(path), Catch::Contains("not a tensorboard.Event"));
}

TEST_CASE("tensorboard events: the restart rule keeps the steps before the resumed one", "[tensorboard]") {
  const std::string dir = test::temp_dir("tb-truncate");
  // Attempt 1 logged steps 0..6 and was killed while appending step 7; attempt 2 resumed at
  // step 4 (its checkpoint) and logged 4..5 before it too was killed; attempt 3 resumes at step 5.
  const std::string first = write_steps(dir, 0, 6);
  write_bytes(first, bytes_of(first) + frame_event_record(serialize_scalar_event(1.7e9, 7, scalars_of_step(7))).substr(0, 9));
  CHECK(keep_tensorboard_steps_before(dir, 4).records_dropped == 3);
  const std::string second = write_steps(dir, 4, 5);
  CHECK(second > first);  // named to sort after it
  CHECK(find_tensorboard_event_files(dir) == std::vector<std::string>{first, second});
  const std::string first_after_attempt_2 = bytes_of(first);
  write_bytes(dir + "/.rewrite.12345.tmp", "a temporary left by a rank killed while rewriting");

  const TensorBoardTruncation t = keep_tensorboard_steps_before(dir, 5);
  CHECK(t.records_dropped == 1);
  CHECK(t.files_rewritten == 1);
  CHECK(t.files_removed == 0);
  CHECK(t.torn_tails == 0);
  CHECK(steps_in(first) == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(bytes_of(first) == first_after_attempt_2);  // untouched: nothing of it was at or past step 5
  CHECK(steps_in(second) == std::vector<std::int64_t>{4});
  CHECK(read_tensorboard_event_file(second).events.front().file_version == "brain.Event:2");
  CHECK_FALSE(fs::exists(dir + "/.rewrite.12345.tmp"));

  // Back to step 2: the second file has no step left and goes; the first keeps 0..1.
  const TensorBoardTruncation back = keep_tensorboard_steps_before(dir, 2);
  CHECK(back.files_removed == 1);
  CHECK(back.records_dropped == 3);
  CHECK(find_tensorboard_event_files(dir) == std::vector<std::string>{first});
  CHECK(steps_in(first) == std::vector<std::int64_t>{0, 1});
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
  // A folder that does not exist has nothing to keep; a malformed file is named.
  CHECK(keep_tensorboard_steps_before(dir + "/none", 0).records_dropped == 0);
  write_bytes(dir + "/events.out.tfevents.1.x.1.0", "not records at all, and longer than a header");
  CHECK_THROWS_WITH(keep_tensorboard_steps_before(dir, 1), Catch::Contains("events.out.tfevents.1.x.1.0"));
}

TEST_CASE("tensorboard events: a new file's name sorts after the folder's newer ones", "[tensorboard]") {
  const std::string dir = test::temp_dir("tb-names");
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string ahead = dir + "/" + tensorboard_event_file_name(now + 100, "otherhost", 99999, 0);
  write_bytes(ahead, "");
  TensorBoardEventWriter writer(dir, 0);
  CHECK(fs::path(writer.path()).filename().string().rfind("events.out.tfevents." + std::to_string(now + 101) + ".", 0) == 0);
  CHECK(find_tensorboard_event_files(dir).back() == writer.path());
  CHECK(tensorboard_event_file_name(1796594036, "node7", 4242, 3) == "events.out.tfevents.1796594036.node7.4242.3");
}

TEST_CASE("tensorboard events: a step's scalars are the step record's values as floats", "[tensorboard]") {
  StepRecord r;
  r.step = 11;
  r.data_s = 0.0125;
  r.fwd_s = 0.25;
  r.bwd_s = 0.5;
  r.opt_s = 0.0625;
  r.comm_exposed_s = 0.1;
  r.loss = 2.718281828459045;
  r.lr = 3e-4;
  r.grad_norm = 1.4142135623730951;
  r.tokens_per_s = 12345.678;
  r.mfu = 0.4321;
  const std::vector<TensorBoardScalar> rank_only = {
      {"time/data_s", float(0.0125)}, {"time/compute_s", float(0.8125)}, {"time/comm_exposed_s", float(0.1)}};
  CHECK(tensorboard_step_scalars(r, false) == rank_only);
  std::vector<TensorBoardScalar> job = rank_only;
  job.insert(job.end(), {{"train/loss", float(2.718281828459045)},
                         {"train/learning_rate", float(3e-4)},
                         {"train/grad_norm", float(1.4142135623730951)},
                         {"train/tokens_per_s", float(12345.678)},
                         {"train/mfu", float(0.4321)}});
  CHECK(tensorboard_step_scalars(r, true) == job);
  r.extra = {{"holdout_loss", 3.25}, {"holdout_tokens", 640}, {"eval_s", 0.5}};
  job.push_back({"eval/holdout_loss", 3.25f});
  CHECK(tensorboard_step_scalars(r, true) == job);
}

TEST_CASE("tensorboard events: a full disk is an IoError naming the file, and what was written reads back",
          "[tensorboard][.needs-tmpfs]") {
  // A real full disk: a 64 KiB tmpfs (root and mount rights; ctest's ckpt_full_disk entry runs the
  // [needs-tmpfs] cases and reports them skipped, with the reason, where a tmpfs cannot be mounted).
  const std::string dir = test::temp_dir("tb-full") + "/mnt";
  fs::create_directory(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k") != 0)
    FAIL("cannot mount a small tmpfs (" << std::strerror(errno) << "); run [needs-tmpfs] as root (ctest: ckpt_full_disk)");
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{dir};
  TensorBoardEventWriter writer(dir + "/rank_0", 0);
  std::int64_t written = 0;
  try {
    for (; written < 100000; ++written) writer.write_step(written, scalars_of_step(written));
    FAIL("64 KiB held 100000 steps");
  } catch (const IoError& e) {
    CHECK_THAT(e.what(), Catch::Contains(writer.path()) && Catch::Contains(std::strerror(ENOSPC)));
  }
  CHECK(written > 100);
  const TensorBoardEventFile file = read_tensorboard_event_file(writer.path());
  const std::vector<std::int64_t> steps = steps_in(writer.path());
  CHECK(std::int64_t(steps.size()) == written);  // every step whose write returned, the failed one at most torn
  CHECK(file.events.back().step == written - 1);
}
