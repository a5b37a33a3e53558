// The index's tensor table and the rank files' piece tables are read strictly (issue 50): each
// records things twice (a tensor's shape as an attribute and as its dataset's extent; its type as
// an attribute, as its dataset's type and as its pieces' type; a piece's offset as its name and as
// an attribute; the tensor's size in the index and in each piece), and a disagreement is a corrupt
// file, named, never a tensor read as another shape or type or a piece read as other elements.
// Found by the fuzz targets ckpt_index and ckpt_pieces (fuzz/targets/); their inputs are replayed by
// fuzz_replay_ckpt_index and fuzz_replay_ckpt_pieces.
#include <catch2/catch.hpp>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "test_ckpt_support.hpp"

namespace ck = shardtrain::ckpt;
namespace fs = std::filesystem;
using namespace shardtrain::test;
using namespace shardtrain::test::ckpt_fixture;

namespace {

void set_ints(hid_t file, const std::string& object, const std::string& name, const std::vector<std::int64_t>& values,
              bool scalar = false) {
  H5Adelete_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT);
  const hsize_t n = values.size();
  const hid_t space = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
  const hid_t attr =
      H5Acreate_by_name(file, object.c_str(), name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(attr >= 0);
  H5Awrite(attr, H5T_NATIVE_INT64, values.data());
  H5Aclose(attr);
  H5Sclose(space);
}

// Replaces a piece dataset by one of another stored type holding the same values, attributes kept.
void restore_as(hid_t file, const std::string& piece, hid_t stored, std::int64_t offset, std::int64_t tensor_numel) {
  const hid_t old = H5Dopen2(file, piece.c_str(), H5P_DEFAULT);
  REQUIRE(old >= 0);
  const hid_t space = H5Dget_space(old);
  std::vector<double> values(std::size_t(H5Sget_simple_extent_npoints(space)));
  H5Dread(old, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(old);
  H5Ldelete(file, piece.c_str(), H5P_DEFAULT);
  const hid_t d = H5Dcreate2(file, piece.c_str(), stored, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(d >= 0);
  H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(d);
  H5Sclose(space);
  set_ints(file, piece, "offset", {offset}, true);
  set_ints(file, piece, "tensor_numel", {tensor_numel}, true);
}

}  // namespace

TEST_CASE("ckpt: an index or a piece table that disagrees with itself is refused, naming the file", "[ckpt]") {
  const auto self = test_communicator(MPI_COMM_SELF);
  const std::string dir = temp_dir("ckpt-tables");
  const auto state = make_state(3);
  save_state(dir, state, 1, *self);
  const std::string folder = dir + "/step_00000001";
  const std::string index = folder + "/index.h5";
  const std::string rank_file = folder + "/rank_00000.h5";
  REQUIRE(ck::validate_checkpoint(folder).empty());
  // The rank file is changed below as a buggy writer would have written it: the ranks that open a
  // checkpoint rank 0 validated do not re-hash (verify_files off), so only the structure stops it.
  ck::ReadOptions unhashed;
  unhashed.verify_files = false;
  auto refusal = [&](const ck::ReadOptions& options) {
    const std::string why = ck::validate_checkpoint(folder, options);
    INFO(why);
    CHECK_THROWS_AS(ck::CheckpointReader(folder, options), shardtrain::IoError);
    return why;
  };

  SECTION("a dtype attribute of another type of the same size (float64 -> int64)") {
    edit(index, [](hid_t f) { set_string(f, "/tensors/extra.f64", "dtype", "int64"); });
    const std::string why = refusal({});
    CHECK(contains(why, index + ": /tensors/extra.f64: its dtype attribute says int64, its dataset stores 8-byte floats"));
  }
  SECTION("a shape attribute of the same size, transposed") {
    edit(index, [](hid_t f) { set_ints(f, "/tensors/wpe", "shape", {16, 11}); });
    CHECK(contains(refusal({}), index + ": /tensors/wpe: its shape attribute [16, 11] disagrees with its dataset's extent [11, 16]"));
  }
  SECTION("a shape whose element count wraps around 2^64") {
    edit(index, [](hid_t f) {
      set_ints(f, "/tensors/scalar.gain", "shape", {std::int64_t(1) << 32, std::int64_t(1) << 32, 2});
      set_ints(f, "/tensors/scalar.gain", "numel", {0}, true);
    });
    CHECK(contains(refusal({}), index + ": /tensors/scalar.gain: shape [4294967296, 4294967296, 2] has a negative dimension "
                                        "or more than 2^63 elements"));
  }
  SECTION("an unknown dtype and a malformed checksum name the index") {
    edit(index, [](hid_t f) { set_string(f, "/tensors/wte", "dtype", "float33"); });
    CHECK(contains(refusal({}), index + ": /tensors/wte: unknown element type 'float33'"));
    edit(index, [](hid_t f) {
      set_string(f, "/tensors/wte", "dtype", "float32");
      set_string(f, "/tensors/wte", "checksum", "sum64:not-hex");
    });
    CHECK(contains(refusal({}), index + ": /tensors/wte: checkpoint: checksum 'sum64:not-hex' is not of the form"));
  }
  SECTION("a checksum of the index that the manifest's digest of the tensor table does not cover") {
    edit(index, [](hid_t f) { set_string(f, "/tensors/ln_f.weight", "checksum", "sum64:0123456789abcdef"); });
    CHECK(contains(refusal({}), index + ": its tensor table (the names, types, shapes and checksums of " +
                                    std::to_string(state.specs.size()) +
                                    " tensors) does not match the manifest's tensor_table_sha256 (corrupt index)"));
    // One digest of the table, not a pass over the data: the ranks that do not re-hash refuse it too.
    CHECK(contains(refusal(unhashed), "tensor_table_sha256"));
  }
  SECTION("the same in a checkpoint written before the digest: the verified pieces do not add up to it") {
    restamp(folder, [](nlohmann::json& manifest) { manifest.erase("tensor_table_sha256"); });
    REQUIRE(ck::validate_checkpoint(folder).empty());
    edit(index, [](hid_t f) { set_string(f, "/tensors/ln_f.weight", "checksum", "sum64:0123456789abcdef"); });
    CHECK(contains(refusal({}), index + ": /tensors/ln_f.weight records checksum sum64:0123456789abcdef, the pieces"));
    // Without the hashes the pieces prove nothing, so only a whole read sees it (as before).
    CHECK(ck::validate_checkpoint(folder, unhashed).empty());
  }
  SECTION("a piece stored as another type (float32 values as float64)") {
    edit(rank_file, [](hid_t f) { restore_as(f, "/pieces/wte/00000000000000000000", H5T_IEEE_F64LE, 0, 37 * 16); });
    restamp(folder);  // the file grew
    CHECK(contains(refusal({}),
                   rank_file + ": /pieces/wte/00000000000000000000: stores 8-byte floats, the index says 'wte' is float32"));
  }
  SECTION("a piece whose offset attribute disagrees with its name") {
    edit(rank_file, [](hid_t f) { set_ints(f, "/pieces/wpe/00000000000000000000", "offset", {3}, true); });
    CHECK(contains(refusal(unhashed),
                   rank_file + ": /pieces/wpe/00000000000000000000: its offset attribute 3 disagrees with its name"));
  }
  SECTION("a piece of a tensor of another size") {
    edit(rank_file, [](hid_t f) { set_ints(f, "/pieces/wpe/00000000000000000000", "tensor_numel", {177}, true); });
    CHECK(contains(refusal(unhashed), rank_file + ": /pieces/wpe/00000000000000000000: a piece of a 177-element 'wpe', " +
                                          index + " says 176 elements"));
  }
  SECTION("a piece past the tensor's end, named as such") {
    edit(rank_file, [](hid_t f) {
      H5Lmove(f, "/pieces/ln_f.weight/00000000000000000000", f, "/pieces/ln_f.weight/00000000000000000010", H5P_DEFAULT,
              H5P_DEFAULT);
      set_ints(f, "/pieces/ln_f.weight/00000000000000000010", "offset", {10}, true);
    });
    CHECK(contains(refusal(unhashed), rank_file + ": /pieces/ln_f.weight/00000000000000000010: elements [10, +16) lie "
                                                  "outside the tensor's 16"));
  }
}

namespace {
// A string attribute of `object`, read with the plain HDF5 API (trailing NULs dropped).
std::string plain_string_attr(hid_t file, const std::string& object, const std::string& name) {
  const hid_t attr = H5Aopen_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(attr >= 0);
  const hid_t type = H5Aget_type(attr);
  std::string text(H5Tget_size(type), '\0');
  H5Aread(attr, type, text.data());
  H5Tclose(type);
  H5Aclose(attr);
  return text.substr(0, text.find_last_not_of('\0') + 1);
}
std::vector<std::int64_t> plain_ints_attr(hid_t file, const std::string& object, const std::string& name) {
  const hid_t attr = H5Aopen_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(attr >= 0);
  const hid_t space = H5Aget_space(attr);
  std::vector<std::int64_t> values(std::size_t(H5Sget_simple_extent_npoints(space)));
  H5Aread(attr, H5T_NATIVE_INT64, values.data());
  H5Sclose(space);
  H5Aclose(attr);
  return values;
}
}  // namespace

TEST_CASE("ckpt: the manifest's tensor_table_sha256 is the digest docs/FORMATS.md describes", "[ckpt]") {
  // Rebuilt here from the index's attributes with the plain HDF5 API and the documented line format,
  // not with the reader or tensor_table_sha256().
  const auto self = test_communicator(MPI_COMM_SELF);
  const std::string dir = temp_dir("ckpt-table-digest");
  const auto state = make_state(5);
  save_state(dir, state, 1, *self);
  const std::string index = dir + "/step_00000001/index.h5";
  const hid_t file = H5Fopen(index.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  std::vector<std::string> names;
  for (const auto& spec : state.specs) names.push_back(spec.name);
  std::sort(names.begin(), names.end());
  std::string table;
  for (const auto& name : names) {
    const std::string object = "/tensors/" + name;
    std::string dims;
    for (const std::int64_t d : plain_ints_attr(file, object, "shape")) {
      if (!dims.empty()) dims += ',';
      dims += std::to_string(d);
    }
    table += name + " " + plain_string_attr(file, object, "dtype") + " " + dims + " " +
             std::to_string(plain_ints_attr(file, object, "numel").at(0)) + " " +
             plain_string_attr(file, object, "checksum") + "\n";
  }
  const auto manifest = nlohmann::json::parse(plain_string_attr(file, "/", "manifest"));
  H5Fclose(file);
  INFO(table);
  CHECK(manifest.at("tensor_table_sha256").get<std::string>() ==
        shardtrain::to_hex(shardtrain::sha256(table.data(), table.size())));
  CHECK(table.find("scalar.gain float32  1 sum64:") != std::string::npos);  // a scalar: no dimensions
}
