// What the checkpoint fuzz targets (targets/ckpt_index.cpp, targets/ckpt_pieces.cpp) share: a small
// real checkpoint, changed through the HDF5 API as the input describes, and the oracle that reads it
// back. HDF5's own parser of raw bytes is third-party code and not the target (as for
// dataset_attributes): the targets are the project's readers of what HDF5 hands back, the index's
// tensor table and the rank files' piece tables.
//
//   * base: testdata/ckpt/fuzz-base/step_00000002, written by the project's writer (2 rank files,
//     tensors cut across them, float32/float64/int64 tensors, a scalar and an empty one); rewrite it
//     after a format change with build/tests/shardtrain_tests "[.fuzz-seeds]";
//   * each input gets a fresh copy in the scratch folder;
//   * restamp() re-hashes the rank files into the manifest and stores it with its SHA-256, as the
//     writer does: a change then reaches the reader past the hash checks, as it would if a buggy
//     writer had committed it (a change the hashes catch says nothing about the parsing behind them);
//   * read_back() is the oracle: CheckpointReader opens and validates the copy, and every tensor is
//     read whole (sum64 checked) and in parts. Any error must be a typed one naming the folder; a
//     successful read must give exactly the base's tensors: the same names, shapes, types and bytes
//     (a target never changes the values the rank files hold, only where and how they are described).
#pragma once
#include <hdf5.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/ckpt/read.hpp"

namespace shardtrain::fuzz::ckpt_fixture {

using nlohmann::json;

[[noreturn]] inline void fixture_finding(const std::string& what) {
  std::fprintf(stderr, "fuzz: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline const std::string& base_folder() {
  static const std::string folder = std::string(SHARDTRAIN_TESTDATA) + "/ckpt/fuzz-base/step_00000002";
  return folder;
}

struct Tensor {
  ckpt::TensorSpec spec;
  std::vector<unsigned char> bytes;
};

// The state the base holds, read once through the reader (an intact base is a precondition: the
// process stops when it is not).
inline const std::map<std::string, Tensor>& base_state() {
  static const std::map<std::string, Tensor> state = [] {
    std::map<std::string, Tensor> out;
    try {
      const ckpt::CheckpointReader reader(base_folder());
      for (const auto& t : reader.tensors()) {
        Tensor& copy = out[t.spec.name];
        copy.spec = t.spec;
        copy.bytes.resize(std::size_t(t.spec.bytes()));
        reader.read(t.spec.name, copy.bytes.data());
      }
    } catch (const std::exception& e) {
      fixture_finding(std::string("the base checkpoint does not read (rewrite it: shardtrain_tests \"[.fuzz-seeds]\"): ") +
                      e.what());
    }
    return out;
  }();
  return state;
}

// A fresh copy of the base: <scratch>/ckpt/step_00000002.
inline std::string fresh_copy() {
  namespace fs = std::filesystem;
  (void)base_state();
  const fs::path folder = fs::path(scratch_dir()) / "ckpt" / fs::path(base_folder()).filename();
  fs::remove_all(folder);
  fs::create_directories(folder);
  for (const auto& entry : fs::directory_iterator(base_folder()))
    copy_fixture(entry.path().string(), (folder / entry.path().filename()).string());
  return folder.string();
}

// Sets attribute `name` of `object` (a path from `loc`) from a JSON value, as the writers store
// theirs: an integer as int64, a non-integral number as float64, a string as a fixed-length UTF-8
// string, an array of integers as a 1-D int64 array ([]: a null dataspace, a scalar tensor's shape);
// null deletes it. Anything else changes nothing. HDF5's failures are ignored: the reader sees
// whatever the file then holds.
inline void set_attribute(hid_t loc, const std::string& object, const std::string& name, const json& value) {
  const bool known = value.is_null() || value.is_string() || value.is_number() || (value.is_array() && value.size() <= 64);
  if (!known || name.empty()) return;
  if (H5Aexists_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT);
  if (value.is_null()) return;
  hid_t type = -1, memory = -1, space = -1;
  std::string text;
  std::int64_t integer = 0;
  double real = 0;
  std::vector<std::int64_t> array;
  const void* data = nullptr;
  if (value.is_string()) {
    text = value.get<std::string>();
    if (text.empty()) text.push_back('\0');
    type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, text.size());
    H5Tset_cset(type, H5T_CSET_UTF8);
    memory = H5Tcopy(type);
    space = H5Screate(H5S_SCALAR);
    data = text.data();
  } else if (value.is_number_integer() || value.is_number_unsigned()) {
    integer = value.is_number_unsigned() ? std::int64_t(value.get<std::uint64_t>()) : value.get<std::int64_t>();
    type = H5Tcopy(H5T_STD_I64LE);
    memory = H5Tcopy(H5T_NATIVE_INT64);
    space = H5Screate(H5S_SCALAR);
    data = &integer;
  } else if (value.is_number_float()) {
    real = value.get<double>();
    type = H5Tcopy(H5T_IEEE_F64LE);
    memory = H5Tcopy(H5T_NATIVE_DOUBLE);
    space = H5Screate(H5S_SCALAR);
    data = &real;
  } else {
    for (const json& x : value)
      array.push_back(x.is_number_unsigned() ? std::int64_t(x.get<std::uint64_t>())
                      : x.is_number_integer() ? x.get<std::int64_t>()
                                              : 0);
    type = H5Tcopy(H5T_STD_I64LE);
    memory = H5Tcopy(H5T_NATIVE_INT64);
    const hsize_t n = array.size();
    space = array.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, &n, nullptr);
    data = array.empty() ? nullptr : array.data();
  }
  const hid_t attr = H5Acreate_by_name(loc, object.c_str(), name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT,
                                       H5P_DEFAULT);
  if (attr >= 0) {
    if (data) H5Awrite(attr, memory, data);
    H5Aclose(attr);
  }
  H5Tclose(memory);
  H5Tclose(type);
  H5Sclose(space);
}

inline std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return to_hex(sha256(bytes.data(), bytes.size()));
}

// Rewrites the manifest of `folder`'s index as the writer would have: each listed rank file's size
// and SHA-256 as they now are, then `patch` merged in (RFC 7396: an input may change any field, the
// file list too), stored with its SHA-256.
inline void restamp(const std::string& folder, const json& patch) {
  namespace fs = std::filesystem;
  const std::string index = (fs::path(folder) / ckpt::kIndexFile).string();
  const hid_t file = H5Fopen(index.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) fixture_finding("cannot open the copy's index " + index);
  std::string text;
  {
    const hid_t attr = H5Aopen_by_name(file, "/", "manifest", H5P_DEFAULT, H5P_DEFAULT);
    const hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
    if (type >= 0 && H5Tis_variable_str(type) <= 0) {
      text.resize(H5Tget_size(type));
      H5Aread(attr, type, text.data());
      while (!text.empty() && text.back() == '\0') text.pop_back();
    }
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
  }
  json manifest = json::parse(text, nullptr, false);
  if (!manifest.is_object()) fixture_finding("the copy's manifest is not a JSON object");
  if (manifest.contains("files") && manifest["files"].is_array())
    for (json& f : manifest["files"]) {
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
      const std::string path = (fs::path(folder) / f["name"].get<std::string>()).string();
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) continue;
      f["bytes"] = std::int64_t(fs::file_size(path, ec));
      f["sha256"] = file_sha256(path);
    }
  if (patch.is_object()) manifest.merge_patch(patch);
  const std::string stored = manifest.dump();
  set_attribute(file, "/", "manifest", stored);
  set_attribute(file, "/", "manifest_sha256", to_hex(sha256(stored.data(), stored.size())));
  H5Fclose(file);
}

// The oracle (see the top of the file). `replaced`: tensors whose index dataset the input replaced
// by one of this extent (the shape is recorded twice, as an attribute and as that extent: when the
// input changed both alike, the checkpoint does describe another shape, and that is read).
inline void read_back(const std::string& folder, const std::map<std::string, std::vector<hsize_t>>& replaced = {}) {
  expect_reader_contract(folder, [&] {
    const ckpt::CheckpointReader reader(folder);
    const auto& base = base_state();
    // Every tensor with elements has pieces in the rank files, so the reader can tell when the index
    // leaves one out. A tensor of no elements has none: only the index records it, and one left out
    // or added there is no value read wrong (there is no value).
    for (const auto& [name, want] : base)
      if (want.spec.numel() > 0 && !reader.find(name))
        fixture_finding("the checkpoint's tensor '" + name + "' is missing from what was read, without an error");
    for (const auto& t : reader.tensors()) {
      const auto it = base.find(t.spec.name);
      if (it == base.end()) {
        if (t.spec.numel() != 0) fixture_finding("read a tensor '" + t.spec.name + "' that the checkpoint does not hold");
        continue;
      }
      const Tensor& want = it->second;
      std::vector<hsize_t> extent(t.spec.shape.begin(), t.spec.shape.end());
      if (extent.empty()) extent.push_back(1);  // a scalar's dataset is (1,)
      const auto changed = replaced.find(t.spec.name);
      const bool shape_ok = changed == replaced.end() ? t.spec.shape == want.spec.shape
                                                      : extent == changed->second && t.spec.numel() == want.spec.numel();
      if (!shape_ok || t.spec.dtype != want.spec.dtype)
        fixture_finding("tensor '" + t.spec.name + "' read with another shape or type than the one written");
      std::vector<unsigned char> whole(want.bytes.size());
      reader.read(t.spec.name, whole.data());
      if (whole != want.bytes) fixture_finding("tensor '" + t.spec.name + "' read whole with other bytes than written");
      // Parts, as the sharded trainers read them (no checksum): cut at a third and at two thirds.
      const std::int64_t n = t.spec.numel(), esize = std::int64_t(dtype_size(t.spec.dtype));
      const std::int64_t cuts[] = {0, n / 3, 2 * n / 3, n};
      for (int k = 0; k < 3; ++k) {
        std::vector<unsigned char> part(std::size_t((cuts[k + 1] - cuts[k]) * esize));
        reader.read_range(t.spec.name, cuts[k], cuts[k + 1] - cuts[k], part.data());
        if (!part.empty() && std::memcmp(part.data(), want.bytes.data() + cuts[k] * esize, part.size()) != 0)
          fixture_finding("tensor '" + t.spec.name + "' read in parts with other bytes than written");
      }
    }
  });
}

}  // namespace shardtrain::fuzz::ckpt_fixture
