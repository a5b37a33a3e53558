// Checkpoint format and round trips: the spread helper, the layout-independent checksum, the
// manifest, and write/read at 1, 2 and 4 ranks (the [mpi] case runs under mpirun -np 1, 2, 4),
// including reading the index's virtual datasets with the plain HDF5 C API, and with h5dump (a case
// of its own, [needs-h5dump]: ctest's ckpt_h5dump_np2 entry, skipped where h5dump is not installed).
#include <catch2/catch.hpp>
#include <hdf5.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "shardtrain/base/error.hpp"
#include "test_ckpt_support.hpp"

namespace ck = shardtrain::ckpt;
namespace fs = std::filesystem;
using namespace shardtrain::test;
using namespace shardtrain::test::ckpt_fixture;

TEST_CASE("ckpt: spread_ranges gives every element exactly one rank, balanced", "[ckpt]") {
  const auto state = make_state();
  std::int64_t total_bytes = 0;
  for (const auto& s : state.specs) total_bytes += s.bytes();
  for (int world = 1; world <= 7; ++world) {
    std::vector<std::vector<int>> owner(state.specs.size());
    for (std::size_t i = 0; i < state.specs.size(); ++i) owner[i].assign(std::size_t(state.specs[i].numel()), 0);
    for (int r = 0; r < world; ++r) {
      std::int64_t bytes = 0;
      for (const auto& fr : ck::spread_ranges(state.specs, world, r)) {
        REQUIRE(fr.count > 0);
        for (std::int64_t e = fr.offset; e < fr.offset + fr.count; ++e) owner[fr.tensor][std::size_t(e)]++;
        bytes += fr.count * std::int64_t(ck::dtype_size(state.specs[fr.tensor].dtype));
      }
      // Balanced to within one element of the widest type.
      CHECK(std::abs(bytes - total_bytes / world) <= 16);
    }
    for (const auto& o : owner)
      for (int c : o) REQUIRE(c == 1);
  }
  CHECK_THROWS_AS(ck::spread_ranges(state.specs, 2, 2), shardtrain::UsageError);
}

TEST_CASE("ckpt: sum64 checksum is independent of how a tensor is cut into pieces", "[ckpt]") {
  const auto v = random_floats(1001, 7);
  const std::uint64_t whole = ck::piece_checksum(v.data(), 1001, ck::DType::kFloat32, 0);
  for (std::int64_t cut : {1, 17, 500, 1000}) {
    const std::uint64_t a = ck::piece_checksum(v.data(), cut, ck::DType::kFloat32, 0);
    const std::uint64_t b = ck::piece_checksum(v.data() + cut, 1001 - cut, ck::DType::kFloat32, cut);
    CHECK(a + b == whole);
  }
  // Any single change (a flipped bit, two swapped elements) changes it.
  auto w = v;
  std::uint32_t bits;
  std::memcpy(&bits, &w[123], 4);
  bits ^= 1u << 31;
  std::memcpy(&w[123], &bits, 4);
  CHECK(ck::piece_checksum(w.data(), 1001, ck::DType::kFloat32, 0) != whole);
  w = v;
  std::swap(w[3], w[4]);
  CHECK(ck::piece_checksum(w.data(), 1001, ck::DType::kFloat32, 0) != whole);
  CHECK(ck::parse_checksum(ck::format_checksum(whole)) == whole);
  CHECK_THROWS_AS(ck::parse_checksum("sum64:xyz"), shardtrain::UsageError);
}

TEST_CASE("ckpt: manifest JSON round trip and missing fields name themselves", "[ckpt]") {
  auto m = make_manifest(42, 2);
  m.writers = 1;
  m.files.push_back({"rank_00000.h5", 0, 123, std::string(64, 'a')});
  const auto j = m.to_json();
  const auto back = ck::CheckpointManifest::from_json(j);
  CHECK(back.to_json() == j);
  CHECK(back.step == 42);
  CHECK(back.layout.world_size == 2);
  CHECK(back.data_cutoff == "2024-05-01T00:00:00Z");
  for (const char* path : {"step", "sampler", "rng", "extra", "files"}) {
    auto broken = j;
    broken.erase(path);
    try {
      ck::CheckpointManifest::from_json(broken, "x/index.h5");
      FAIL("accepted a manifest without " << path);
    } catch (const shardtrain::UsageError& e) {
      CHECK(contains(e.what(), std::string("has no field /") + path));
      CHECK(contains(e.what(), "x/index.h5"));
    }
  }
  auto broken = j;
  broken["sampler"].erase("consumed");
  CHECK_THROWS_WITH(ck::CheckpointManifest::from_json(broken), Catch::Contains("has no field /sampler/consumed"));
  broken = j;
  broken["format_version"] = 99;
  CHECK_THROWS_WITH(ck::CheckpointManifest::from_json(broken), Catch::Contains("format_version 99"));
}

TEST_CASE("ckpt: folder names", "[ckpt]") {
  CHECK(ck::step_folder_name(100) == "step_00000100");
  CHECK(ck::parse_step_folder_name("step_00000100") == 100);
  CHECK(ck::parse_step_folder_name("step_00000100.tmp") == -1);
  CHECK(ck::parse_step_folder_name("step_100") == -1);
  CHECK(ck::rank_file_name(3) == "rank_00003.h5");
  CHECK_THROWS_AS(ck::step_folder_name(100000000), shardtrain::UsageError);
}

namespace {

// Reads a virtual dataset of the index whole with the HDF5 C API; returns its shape.
std::vector<unsigned char> read_vds(const std::string& index, const std::string& name, hid_t mem_type,
                                    std::size_t esize, std::vector<hsize_t>* dims) {
  hid_t f = H5Fopen(index.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
  hid_t d = H5Dopen2(f, ("/tensors/" + name).c_str(), H5P_DEFAULT);
  REQUIRE(d >= 0);
  hid_t s = H5Dget_space(d);
  const int nd = H5Sget_simple_extent_ndims(s);
  dims->assign(std::size_t(nd), 0);
  H5Sget_simple_extent_dims(s, dims->data(), nullptr);
  std::vector<unsigned char> out(std::size_t(H5Sget_simple_extent_npoints(s)) * esize);
  REQUIRE(H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
  return out;
}

void check_index_with_c_api(const std::string& folder, const ToyState& state) {
  const std::string index = folder + "/index.h5";
  for (std::size_t i = 0; i < state.specs.size(); ++i) {
    const auto& spec = state.specs[i];
    hid_t type = spec.dtype == ck::DType::kFloat32   ? H5T_NATIVE_FLOAT
                 : spec.dtype == ck::DType::kFloat64 ? H5T_NATIVE_DOUBLE
                                                     : H5T_NATIVE_INT64;
    std::vector<hsize_t> dims;
    const auto bytes = read_vds(index, spec.name, type, ck::dtype_size(spec.dtype), &dims);
    INFO(spec.name);
    if (spec.shape.empty()) {
      CHECK(dims == std::vector<hsize_t>{1});
    } else {
      CHECK(dims == std::vector<hsize_t>(spec.shape.begin(), spec.shape.end()));  // the logical shape
    }
    CHECK(bytes == state.data[i]);
  }
}

}  // namespace

TEST_CASE("ckpt: round trip from every rank, whole tensors, flat ranges, index via HDF5 C API", "[mpi][ckpt]") {
  const auto [rank, world, dir, comm] = mpi_case("ckpt-rt");
  const auto state = make_state(1);

  const auto result = save_state(dir, state, 7, *comm);
  CHECK(result.path == dir + "/step_00000007");
  CHECK(result.bytes_local > 0);
  CHECK(fs::exists(dir + "/step_00000007/index.h5"));
  CHECK_FALSE(fs::exists(dir + "/step_00000007.tmp"));
  CHECK(ck::read_latest(dir) == "step_00000007");
  for (int r = 0; r < world; ++r) CHECK(fs::exists(dir + "/step_00000007/" + ck::rank_file_name(r)));

  // Every rank reads everything back, bitwise.
  ck::ReadOptions ro;
  ro.expected_model = toy_model();
  ck::CheckpointReader reader(result.path, ro);
  CHECK(reader.manifest().step == 7);
  CHECK(reader.manifest().writers == world);
  CHECK(reader.manifest().layout.world_size == world);
  CHECK(reader.manifest().sampler_consumed == 56);
  CHECK(reader.manifest().rng.at("philox_counter") == 7);
  CHECK(reader.manifest().extra.at("note") == "test");
  CHECK(int(reader.manifest().files.size()) == world);
  REQUIRE(reader.tensors().size() == state.specs.size());
  for (std::size_t i = 0; i < state.specs.size(); ++i) {
    const auto& spec = state.specs[i];
    const auto& info = reader.at(spec.name);
    CHECK(info.spec.shape == spec.shape);
    CHECK(info.spec.dtype == spec.dtype);
    std::vector<unsigned char> back(state.data[i].size());
    reader.read(spec.name, back.data());
    CHECK(back == state.data[i]);
  }
  // A flat range that crosses piece boundaries (with 4 ranks the 3-D tensor is cut).
  const auto expect = state.floats("h.0.attn.qkv.weight");
  const auto range = reader.read_floats("h.0.attn.qkv.weight", 100, 555);
  CHECK(std::equal(range.begin(), range.end(), expect.begin() + 100));
  CHECK_THROWS_AS(reader.read_floats("h.0.attn.qkv.weight", 700, 100), shardtrain::UsageError);
  CHECK_THROWS_WITH(reader.at("nope"), Catch::Contains("no tensor 'nope'"));

  comm->barrier();
  if (rank == 0) {
    // The index reads whole logical tensors with the plain C API, also after the folder moved.
    check_index_with_c_api(result.path, state);
    const std::string moved = dir + "/moved_copy";
    fs::copy(result.path, moved, fs::copy_options::recursive);
    check_index_with_c_api(moved, state);
    fs::remove_all(moved);
  }
  comm->barrier();
}

TEST_CASE("ckpt: h5dump reads a logical tensor through the index of a moved checkpoint", "[ckpt][.needs-h5dump]") {
  // Run under mpirun (ctest: ckpt_h5dump_np2), so the tensor's pieces are in several rank files.
  const auto [rank, world, dir, comm] = mpi_case("ckpt-h5dump");
  const auto state = make_state(1);
  const auto result = save_state(dir, state, 7, *comm);
  comm->barrier();
  if (rank == 0) {
    const std::string moved = dir + "/moved_copy";
    fs::copy(result.path, moved, fs::copy_options::recursive);
    // h5dump from another working directory: no NaN fill anywhere, so every piece was found.
    const std::string cmd = "cd / && h5dump -d /tensors/h.0.mlp.fc.weight " + moved + "/index.h5 > " + dir +
                            "/dump.txt 2>&1";
    CHECK(std::system(cmd.c_str()) == 0);
    std::ifstream in(dir + "/dump.txt");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(contains(text, "( 3, 5, 7 )"));
    CHECK_FALSE(contains(text, "nan"));
    fs::remove_all(moved);
  }
  comm->barrier();
}

TEST_CASE("ckpt: a missing rank file reads as NaN through the index, and the reader refuses it", "[mpi][ckpt]") {
  const auto [rank, world, dir, comm] = mpi_case("ckpt-missing");
  const auto state = make_state(2);
  save_state(dir, state, 1, *comm);
  save_state(dir, state, 2, *comm);
  comm->barrier();
  if (rank == 0) {
    const std::string victim = dir + "/step_00000002/" + ck::rank_file_name(world - 1);
    fs::remove(victim);
    // Plain HDF5 reads the VDS without error, as the fill value:
    std::vector<hsize_t> dims;
    const auto bytes = read_vds(dir + "/step_00000002/index.h5", "ln_f.weight", H5T_NATIVE_FLOAT, 4, &dims);
    (void)bytes;  // which tensor lost data depends on the world size; the reader must refuse either way
    const std::string error = ck::validate_checkpoint(dir + "/step_00000002");
    CHECK(contains(error, victim));
    CHECK(contains(error, "missing"));
    const auto chosen = ck::find_resume_checkpoint(dir);
    REQUIRE(chosen);
    CHECK(*chosen == dir + "/step_00000001");
  }
  comm->barrier();
}

TEST_CASE("ckpt: pieces that do not cover a tensor fail the save on every rank", "[mpi][ckpt]") {
  const auto [rank, world, dir, comm] = mpi_case("ckpt-cover");
  const auto state = make_state(3);
  auto pieces = ck::spread_pieces(state.specs, state.pointers(), world, rank);
  if (rank == world - 1) pieces.pop_back();  // the last rank forgets its last piece
  CHECK_THROWS_WITH(ck::save_checkpoint(dir, make_manifest(5, world), state.specs, pieces, *comm),
                    Catch::Contains("written by no rank"));
  comm->barrier();
  CHECK_FALSE(fs::exists(dir + "/step_00000005"));
  CHECK_FALSE(fs::exists(dir + "/step_00000005.tmp"));
  CHECK(ck::read_latest(dir).empty());
  comm->barrier();
}

TEST_CASE("ckpt: the ranks validate a resume candidate together, each hashing its share of the files",
          "[mpi][ckpt]") {
  const auto [rank, world, dir, comm] = mpi_case("ckpt-resume-shared");
  const auto state = make_state(17);
  for (const std::int64_t step : {1, 2, 3}) save_state(dir, state, step, *comm);
  comm->barrier();
  const std::string step2 = dir + "/step_00000002", step3 = dir + "/step_00000003";
  ck::ReadOptions unverified;
  unverified.verify_files = false;
  // Step 3: a flipped byte in the data of the last rank file, the one only the last rank hashes.
  // Step 2, as a writer before the manifest's tensor-table digest left it: its index records another
  // sum64 for ln_f.weight, which only the shares' sums added up across the ranks can show (every
  // rank file is intact).
  const std::string last_file = ck::CheckpointReader(step3, unverified).manifest().files.back().name;
  if (rank == 0) {
    const ck::CheckpointReader before(step3, unverified);
    std::string flipped;
    for (const auto& t : before.tensors())
      for (const auto& p : t.pieces)
        if (flipped.empty() && p.file == last_file && p.count > 0) {
          flip_byte(step3 + "/" + p.file, piece_file_offset(step3 + "/" + p.file, p.dataset));
          flipped = p.dataset;
        }
    REQUIRE_FALSE(flipped.empty());
    restamp(step2, [](nlohmann::json& manifest) { manifest.erase("tensor_table_sha256"); });
    edit(step2 + "/index.h5", [](hid_t f) { set_string(f, "/tensors/ln_f.weight", "checksum", "sum64:0123456789abcdef"); });
  }
  comm->barrier();
  const auto chosen = ck::find_resume_checkpoint_collective(dir, *comm);
  REQUIRE(chosen);
  CHECK(*chosen == dir + "/step_00000001");

  // What each share sees alone: only the last rank's share holds the damaged file; no share alone
  // can tell step 2's index from a good one.
  ck::ReadOptions mine;
  mine.share = {rank, world};
  if (rank == world - 1)
    CHECK_THROWS_WITH(ck::CheckpointReader(step3, mine), Catch::Contains(last_file) && Catch::Contains("SHA-256"));
  else
    CHECK_NOTHROW(ck::CheckpointReader(step3, mine));
  if (world > 1) {
    const ck::CheckpointReader share2(step2, mine);
    CHECK(share2.piece_sums_owed());
    CHECK(share2.share_piece_sums().size() == share2.tensors().size());
    // A checkpoint with the digest owes no sums: step 1 (intact) is tied to its manifest already.
    CHECK_FALSE(ck::CheckpointReader(dir + "/step_00000001", mine).piece_sums_owed());
  }
  CHECK_THROWS_WITH(ck::CheckpointReader(step2), Catch::Contains("/tensors/ln_f.weight records checksum"));
  comm->barrier();
}

TEST_CASE("ckpt: rank 0's resume choice, or its refusal, reaches every rank", "[mpi][ckpt]") {
  const auto [rank, world, dir, comm] = mpi_case("ckpt-resume-collective");
  CHECK_FALSE(ck::find_resume_checkpoint_collective(dir, *comm));  // nothing saved yet
  const auto state = make_state(13);
  save_state(dir, state, 1, *comm);
  save_state(dir, state, 2, *comm);
  comm->barrier();
  // Only rank 0 looks at the files: the other ranks learn its choice (a string of the path's length).
  if (rank == 0) fs::remove(dir + "/step_00000002/index.h5");
  const auto chosen = ck::find_resume_checkpoint_collective(dir, *comm);
  REQUIRE(chosen);
  CHECK(*chosen == dir + "/step_00000001");
  if (rank == 0) std::ofstream(dir + "/a_file") << "x";
  CHECK_THROWS_AS(ck::find_resume_checkpoint_collective(dir + "/a_file", *comm), shardtrain::UsageError);
  CHECK_THROWS_WITH(ck::find_resume_checkpoint_collective(dir + "/a_file", *comm),
                    Catch::Contains(dir + "/a_file: checkpoint path exists and is not a folder"));
  comm->barrier();
}
