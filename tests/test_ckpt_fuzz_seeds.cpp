// The checkpoint fuzz targets' inputs (issue 50: fuzz/targets/ckpt_index.cpp, ckpt_pieces.cpp):
// the small real checkpoint they change (testdata/ckpt/fuzz-base/step_00000002, written here by the
// project's writer: two rank files, tensors cut across them, float32/float64/int64 tensors, a
// scalar and an empty one) and their seeds, change descriptions naming that checkpoint's real
// tensors, pieces and checksums. Hidden (never in a ctest run); rewrite them after a format change
// with
//   build/tests/shardtrain_tests "[.fuzz-seeds]"
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "shardtrain/ckpt/ckpt.hpp"
#include "test_ckpt_support.hpp"

namespace ck = shardtrain::ckpt;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace shardtrain::test;

TEST_CASE("fuzz seeds: a small checkpoint and the changes the checkpoint targets start from", "[.fuzz-seeds]") {
  const std::string testdata = SHARDTRAIN_TESTDATA;
  const std::string dir = testdata + "/ckpt/fuzz-base";
  fs::remove_all(dir);
  const std::vector<ck::TensorSpec> specs = {
      {"h.0.bias", {7}},
      {"wte", {5, 4}},  // the middle of the bytes: cut across the two files
      {"gain", {}},
      {"empty", {0, 4}},
      {"counters", {3}, ck::DType::kInt64},
      {"moments", {2, 3}, ck::DType::kFloat64},
  };
  std::vector<std::vector<unsigned char>> data;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::vector<unsigned char> bytes(std::size_t(specs[i].bytes()));
    const auto values = random_floats(bytes.size(), unsigned(100 + i));  // any bits will do, one float per byte
    for (std::size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<unsigned char>(values[k] * 127.0f + 128.0f);
    data.push_back(std::move(bytes));
  }
  std::vector<const void*> pointers;
  for (const auto& d : data) pointers.push_back(d.data());
  const auto self = test_communicator(MPI_COMM_SELF);
  ck::CheckpointManifest manifest = ckpt_fixture::make_manifest(2, 2);
  manifest.model = ckpt_fixture::toy_model();
  ck::SaveOptions options;
  options.update_latest = false;
  ck::save_checkpoint_files(dir, manifest, specs, 2, [&](int file) { return ck::spread_pieces(specs, pointers, 2, file); },
                            *self, options);
  const std::string folder = dir + "/step_00000002";
  const ck::CheckpointReader reader(folder);

  auto write = [&](const std::string& file, const json& j) {
    fs::create_directories(fs::path(testdata + "/fuzz/" + file).parent_path());
    std::ofstream(testdata + "/fuzz/" + file) << j.dump(2) << "\n";
  };
  const ck::TensorInfo& wte = reader.at("wte");
  REQUIRE(wte.pieces.size() == 2);  // cut across the two rank files (spread_pieces)
  const std::string wte_checksum = ck::format_checksum(wte.checksum);

  // ckpt_index: the tensor table, with the attributes the writer stores (shape, dtype, numel, checksum).
  write("ckpt_index/seed-unchanged.json", json::object());
  // (crash-shape-disagrees.json, {"tensors": {"wte": {"shape": [4, 5]}}}, and crash-dtype-disagrees.json,
  // {"tensors": {"moments": {"dtype": "int64"}}}, are kept by hand: each was once read as that shape or type.)
  write("ckpt_index/seed-checksum.json", {{"tensors", {{"h.0.bias", {{"checksum", "sum64:0000000000000000"}}}}}});
  write("ckpt_index/seed-removed.json", {{"tensors", {{"counters", nullptr}}}});
  write("ckpt_index/seed-plain-dataset.json",
        {{"tensors", {{"wte", {{"extent", {5, 4}}, {"shape", {5, 4}}, {"dtype", "float32"}, {"numel", 20},
                                {"checksum", wte_checksum}}}}}});
  write("ckpt_index/seed-wrapping-shape.json",
        {{"tensors", {{"gain", {{"shape", {4294967296LL, 4294967296LL, 2}}, {"numel", 0}}}}}});
  write("ckpt_index/seed-one-writer.json",
        {{"manifest", {{"writers", 1}, {"files", {reader.manifest().to_json()["files"][0]}}}}});
  write("ckpt_index/seed-stale-sha.json", {{"root", {{"manifest_sha256", std::string(64, '0')}}}});

  // ckpt_pieces: the piece datasets of each rank file, named as the writer names them.
  const ck::PieceLocation& first = wte.pieces[0];
  const ck::PieceLocation& second = wte.pieces[1];
  const std::string first_name = first.dataset.substr(std::strlen("/pieces/"));
  const std::string second_name = second.dataset.substr(std::strlen("/pieces/"));
  REQUIRE(first.file == "rank_00000.h5");
  REQUIRE(second.file == "rank_00001.h5");
  write("ckpt_pieces/seed-unchanged.json", json::object());
  write("ckpt_pieces/seed-offset.json", {{"pieces", {{first_name, {{"offset", 1}}}}}});
  write("ckpt_pieces/seed-as-float64.json", {{"pieces", {{first_name, {{"as", "float64"}}}}}});
  write("ckpt_pieces/seed-as-string.json", {{"pieces", {{first_name, {{"as", "string"}}}}}});
  write("ckpt_pieces/seed-extent-2d.json", {{"pieces", {{first_name, {{"extent", {2, first.count / 2}}}}}}});
  write("ckpt_pieces/seed-renamed.json",
        {{"file", 1}, {"pieces", {{second_name, {{"rename", "wte/00000000000000000000"}}}}}});
  write("ckpt_pieces/seed-removed.json", {{"file", 1}, {"pieces", {{second_name, nullptr}}}});
  write("ckpt_pieces/seed-group-removed.json", {{"groups", {{"wte", nullptr}}}});
  write("ckpt_pieces/seed-numel.json", {{"file", 1}, {"pieces", {{second_name, {{"tensor_numel", 21}}}}}});
}
