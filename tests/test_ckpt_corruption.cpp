// Byte-level damage to a small checkpoint (issue 50), read the way a resuming trainer reads it. Two
// checkpoints (steps 1 and 2, two rank files each); then, one damage at a time on a fresh copy, every
// file of the newest one (index.h5 and both rank files) and `latest` is truncated (at 0, 1 byte,
// half, size - 1) or has one bit flipped in its header (the HDF5 superblock), its metadata (the
// index's manifest and tensor table: shapes, types, sum64 checksums; a rank file's piece table) and
// its data (the rank files' pieces). The resume path -- find_resume_checkpoint with the trainer's
// options picks a checkpoint, CheckpointReader opens the choice without re-hashing (as the ranks
// do after rank 0's choice) and every tensor is read, whole with its checksum (replicated
// trainers) and in two flat ranges (sharded ones) -- must give back exactly the state written at
// step 2, or name the damaged file and give back exactly the state of step 1. Never a crash, an
// error after the choice, or any other state.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>

#include "shardtrain/base/error.hpp"
#include "test_ckpt_support.hpp"

namespace ck = shardtrain::ckpt;
namespace fs = std::filesystem;
using namespace shardtrain::test;
using namespace shardtrain::test::ckpt_fixture;

namespace {

// What a resume gives back: the folder it chose, its manifest, every tensor read whole and in ranges.
struct Resumed {
  std::optional<std::string> folder;
  nlohmann::json manifest;
  std::map<std::string, std::vector<unsigned char>> whole, ranges;
};

// Fills `out` as it goes, so that after a throw it still says which folder was chosen.
void resume_like_a_trainer(const std::string& dir, const ToyState& shape, Resumed& out) {
  ck::ReadOptions options;
  options.expected_model = toy_model();  // as train/resume.cpp: the run's model must match
  out.folder = ck::find_resume_checkpoint(dir, options);
  if (!out.folder) return;
  options.verify_files = false;  // rank 0 validated the choice; the ranks open it without re-hashing
  const ck::CheckpointReader reader(*out.folder, options);
  out.manifest = reader.manifest().to_json();
  for (const auto& spec : shape.specs) {
    std::vector<unsigned char> bytes(std::size_t(spec.bytes()));
    reader.read(spec.name, bytes.data());
    out.whole[spec.name] = bytes;
    const std::int64_t half = spec.numel() / 2, esize = std::int64_t(shardtrain::dtype_size(spec.dtype));
    reader.read_range(spec.name, 0, half, bytes.data());
    reader.read_range(spec.name, half, spec.numel() - half, bytes.data() + half * esize);
    out.ranges[spec.name] = bytes;
  }
}

Resumed resume_like_a_trainer(const std::string& dir, const ToyState& shape) {
  Resumed out;
  resume_like_a_trainer(dir, shape, out);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void flip_bit(const std::string& path, std::int64_t offset, int bit) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ (1 << bit));
  f.seekp(offset);
  f.write(&c, 1);
}

// `count` offsets spread evenly over the bytes of `ranges` ([begin, end) pairs, in order).
std::vector<std::int64_t> spread(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, int count) {
  std::int64_t total = 0;
  for (const auto& [a, b] : ranges) total += b - a;
  std::vector<std::int64_t> out;
  for (int k = 0; k < count && total > 0; ++k) {
    std::int64_t at = total * k / count + total / (2 * count);
    for (const auto& [a, b] : ranges) {
      if (at < b - a) {
        out.push_back(a + at);
        break;
      }
      at -= b - a;
    }
  }
  return out;
}

// The complement of `taken` (sorted, disjoint) in [from, to).
std::vector<std::pair<std::int64_t, std::int64_t>> outside(std::vector<std::pair<std::int64_t, std::int64_t>> taken,
                                                          std::int64_t from, std::int64_t to) {
  std::sort(taken.begin(), taken.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto& [a, b] : taken) {
    if (a > from) out.emplace_back(from, std::min(a, to));
    from = std::max(from, b);
  }
  if (from < to) out.emplace_back(from, to);
  return out;
}

struct Damage {
  std::string file;  // relative to the checkpoint directory
  std::string what;  // "truncated to 5 bytes", "bit 3 of byte 811 (manifest)"
  std::function<void(const std::string& path)> apply;
};

}  // namespace

TEST_CASE("ckpt: every byte-level damage to a checkpoint gives back its exact state or falls back naming the file",
          "[ckpt]") {
  const auto self = test_communicator(MPI_COMM_SELF);
  const std::string pristine = temp_dir("ckpt-corruption");
  const ToyState state1 = make_state(1), state2 = make_state(2);
  for (const auto& step_state : {std::pair{1, &state1}, std::pair{2, &state2}}) {
    const ToyState* state = step_state.second;  // not a structured binding: clang 14 cannot capture one
    ck::save_checkpoint_files(pristine, make_manifest(step_state.first, 1), state->specs, 2,
                              [&](int file) { return ck::spread_pieces(state->specs, state->pointers(), 2, file); }, *self);
  }
  const std::string newest = "step_00000002";
  const Resumed intact = resume_like_a_trainer(pristine, state2);
  REQUIRE(intact.folder == pristine + "/" + newest);
  const Resumed previous = [&] {  // what step 1 reads as, alone
    const std::string only_first = temp_dir("ckpt-corruption-first");
    fs::copy(pristine + "/step_00000001", only_first + "/step_00000001", fs::copy_options::recursive);
    return resume_like_a_trainer(only_first, state1);
  }();
  REQUIRE(previous.folder);

  // The damages: the regions of each file located in the intact copy.
  std::vector<Damage> damages;
  auto truncations = [&](const std::string& file) {
    const auto size = std::int64_t(fs::file_size(pristine + "/" + file));
    for (const std::int64_t keep : {std::int64_t(0), std::int64_t(1), size / 2, size - 1})
      damages.push_back({file, "truncated to " + std::to_string(keep) + " of " + std::to_string(size) + " bytes",
                         [keep](const std::string& path) { fs::resize_file(path, std::uintmax_t(keep)); }});
  };
  auto flips = [&](const std::string& file, const std::string& region, const std::vector<std::int64_t>& offsets) {
    REQUIRE(!offsets.empty());
    for (const std::int64_t at : offsets) {
      const int bit = int(at % 8);
      damages.push_back({file, "bit " + std::to_string(bit) + " of byte " + std::to_string(at) + " flipped (" + region + ")",
                         [at, bit](const std::string& path) { flip_bit(path, at, bit); }});
    }
  };
  constexpr std::int64_t kSuperblock = 96;  // HDF5's superblock and root group entry (format 0)
  const ck::CheckpointReader reader(pristine + "/" + newest);
  for (const auto& f : reader.manifest().files) {
    const std::string file = newest + "/" + f.name;
    std::vector<std::pair<std::int64_t, std::int64_t>> data;
    for (const auto& t : reader.tensors())
      for (const auto& p : t.pieces)
        if (p.file == f.name) {
          const std::int64_t at = piece_file_offset(pristine + "/" + file, p.dataset);
          data.emplace_back(at, at + p.count * std::int64_t(shardtrain::dtype_size(t.spec.dtype)));
        }
    truncations(file);
    flips(file, "header", spread({{0, kSuperblock}}, 6));
    flips(file, "piece table", spread(outside(data, kSuperblock, f.bytes), 10));
    flips(file, "data", spread(data, 10));
  }
  {
    const std::string file = newest + "/index.h5";
    const std::string bytes = read_file(pristine + "/" + file);
    const std::string manifest_text = reader.manifest().to_json().dump();
    const auto manifest_at = std::int64_t(bytes.find(manifest_text.substr(0, 40)));
    REQUIRE(manifest_at > 0);
    std::vector<std::pair<std::int64_t, std::int64_t>> table;  // the tensors' checksum and dtype strings
    for (const std::string needle : {"sum64:", "float32", "float64", "int64"})
      for (std::size_t at = bytes.find(needle); at != std::string::npos; at = bytes.find(needle, at + 1))
        table.emplace_back(std::int64_t(at), std::int64_t(at + needle.size() + (needle == "sum64:" ? 16 : 0)));
    REQUIRE(table.size() >= reader.tensors().size() * 2);
    truncations(file);
    flips(file, "header", spread({{0, kSuperblock}}, 6));
    flips(file, "manifest", spread({{manifest_at, manifest_at + std::int64_t(manifest_text.size())}}, 8));
    flips(file, "tensor table strings", spread(table, 12));
    flips(file, "other metadata",
          spread(outside(table, manifest_at + std::int64_t(manifest_text.size()), std::int64_t(bytes.size())), 12));
  }
  truncations("latest");
  flips("latest", "folder name", spread({{0, std::int64_t(fs::file_size(pristine + "/latest"))}}, 14));

  int exact = 0, fell_back = 0;
  for (const Damage& damage : damages) {
    INFO(damage.file << ": " << damage.what);
    const std::string dir = temp_dir("ckpt-corruption-case");
    fs::copy(pristine, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    damage.apply(dir + "/" + damage.file);
    Resumed got;
    try {
      resume_like_a_trainer(dir, state2, got);
    } catch (const std::exception& e) {
      FAIL_CHECK("the resume failed after choosing " << (got.folder ? *got.folder : std::string("nothing")) << ": "
                                                     << e.what());
      continue;
    }
    REQUIRE(got.folder);  // step 1 is intact: there is always a checkpoint to resume from
    if (*got.folder == dir + "/" + newest) {
      ++exact;
      CHECK(got.manifest == intact.manifest);
      for (const auto& spec : state2.specs) {
        INFO("tensor " << spec.name);
        CHECK(got.whole.at(spec.name) == state2.of(spec.name));
        CHECK(got.ranges.at(spec.name) == state2.of(spec.name));
      }
    } else {
      ++fell_back;
      CHECK(*got.folder == dir + "/step_00000001");
      CHECK(got.manifest == previous.manifest);
      for (const auto& spec : state1.specs) {
        INFO("tensor " << spec.name);
        CHECK(got.whole.at(spec.name) == state1.of(spec.name));
        CHECK(got.ranges.at(spec.name) == state1.of(spec.name));
      }
      ck::ReadOptions options;
      options.expected_model = toy_model();
      const std::string why = ck::validate_checkpoint(dir + "/" + newest, options);
      INFO("why step 2 was skipped: " << why);
      CHECK(contains(why, dir + "/" + damage.file));
    }
  }
  // Both outcomes happen (a damage nothing reads is harmless; most are caught), so neither branch
  // above is dead.
  CHECK(exact > 0);
  CHECK(fell_back > 0);
  WARN(damages.size() << " damages: " << exact << " read back as written, " << fell_back << " fell back to step 1");
}
