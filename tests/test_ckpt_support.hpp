// Shared fixtures of the checkpoint tests: a small "model" state with awkward shapes and dtypes,
// a complete manifest, and file-corruption helpers.
#pragma once
#include <catch2/catch.hpp>
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "shardtrain/ckpt/ckpt.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/base/sha256.hpp"
#include "test_support.hpp"

namespace shardtrain::test::ckpt_fixture {

namespace ck = shardtrain::ckpt;

// Replicated state: the same values on every rank (a function of tensor name and index).
struct ToyState {
  std::vector<ck::TensorSpec> specs;
  std::vector<std::vector<unsigned char>> data;  // one buffer per tensor, logical row-major bytes

  std::vector<const void*> pointers() const {
    std::vector<const void*> p;
    for (const auto& d : data) p.push_back(d.data());
    return p;
  }
  const std::vector<unsigned char>& of(const std::string& name) const {
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (specs[i].name == name) return data[i];
    throw std::runtime_error("no tensor " + name);
  }
  std::vector<float> floats(const std::string& name) const {
    const auto& b = of(name);
    std::vector<float> out(b.size() / 4);
    std::memcpy(out.data(), b.data(), b.size());
    return out;
  }
};

// `salt` changes every value (a "later step").
inline ToyState make_state(unsigned salt = 0, int scale = 1) {
  ToyState s;
  const std::vector<ck::TensorSpec> params = {
      {"wte", {37, 16 * scale}},           {"wpe", {11, 16 * scale}},
      {"h.0.attn.qkv.weight", {48, 16}},   {"h.0.attn.qkv.bias", {48}},
      {"h.0.mlp.fc.weight", {3, 5, 7}},    {"ln_f.weight", {16}},
      {"scalar.gain", {}},
  };
  for (const auto& p : params) s.specs.push_back(p);
  for (const auto& p : params) s.specs.push_back({"optim.exp_avg." + p.name, p.shape});
  for (const auto& p : params) s.specs.push_back({"optim.exp_avg_sq." + p.name, p.shape});
  s.specs.push_back({"rng.counters", {5}, ck::DType::kInt64});
  s.specs.push_back({"extra.f64", {2, 3}, ck::DType::kFloat64});
  for (const auto& spec : s.specs) {
    const unsigned seed = unsigned(fnv1a64(spec.name) & 0xffffffu) + salt * 7919u;
    std::vector<unsigned char> bytes(std::size_t(spec.bytes()));
    if (spec.dtype == ck::DType::kFloat32) {
      auto v = random_floats(std::size_t(spec.numel()), seed);
      std::memcpy(bytes.data(), v.data(), bytes.size());
    } else if (spec.dtype == ck::DType::kFloat64) {
      for (std::int64_t i = 0; i < spec.numel(); ++i) {
        const double x = 0.1 * double(i) + seed;
        std::memcpy(bytes.data() + i * 8, &x, 8);
      }
    } else {
      for (std::int64_t i = 0; i < spec.numel(); ++i) {
        const std::int64_t x = std::int64_t(seed) * 1000 + i;
        std::memcpy(bytes.data() + i * 8, &x, 8);
      }
    }
    s.data.push_back(std::move(bytes));
  }
  return s;
}

inline nlohmann::json toy_model() {
  return {{"vocab", 37}, {"seq_len", 11}, {"d_model", 16}, {"n_layer", 1}, {"n_head", 2}};
}

inline ck::CheckpointManifest make_manifest(std::int64_t step, int world) {
  ck::CheckpointManifest m;
  m.step = step;
  m.tokens_seen = step * 8 * 11;
  m.model = toy_model();
  m.config = {{"seed", 1}, {"steps", 100}};
  m.layout = {world, world, 1, 0};
  m.global_batch = 8;
  m.micro_batch = 8 / world > 0 ? 8 / world : 1;
  m.grad_accum = 1;
  m.sampler_epoch = 0;
  m.sampler_consumed = step * 8;
  m.rng = {{"seed", 1}, {"philox_counter", step}};
  m.lr_step = step;
  m.lr = 1e-3;
  m.data_snapshot_id = "abc123";
  m.data_cutoff = "2024-05-01T00:00:00Z";
  m.extra = {{"note", "test"}};
  return m;
}

// Saves `state` at `step` from every rank of `comm`, writing spread across the ranks.
inline ck::SaveResult save_state(const std::string& dir, const ToyState& state, std::int64_t step,
                                 shardtrain::Communicator& comm, const ck::SaveOptions& options = {}) {
  const auto pieces = ck::spread_pieces(state.specs, state.pointers(), comm.size(), comm.rank());
  return ck::save_checkpoint(dir, make_manifest(step, comm.size()), state.specs, pieces, comm, options);
}

// The prologue of an [mpi] case: this rank, the world size, a shared temp folder and a communicator
// over every rank (the job's communicator in these cases).
struct MpiCase {
  int rank = 0, world = 1;
  std::string dir;
  std::unique_ptr<shardtrain::Communicator> comm;
};
inline MpiCase mpi_case(const std::string& tag) {
  MpiCase c;
  c.comm = test_communicator(MPI_COMM_WORLD, tag);
  c.rank = c.comm->rank();
  c.world = c.comm->size();
  c.dir = shared_temp_dir(tag);
  return c;
}

// File offset of the raw data of a piece dataset (contiguous layout).
inline std::int64_t piece_file_offset(const std::string& file, const std::string& dataset) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const haddr_t off = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  return std::int64_t(off);
}

inline void flip_byte(const std::string& file, std::int64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x5a);
  f.seekp(offset);
  f.write(&c, 1);
}

// Runs `change` on the open file (read-write), with HDF5's error printing off.
template <typename F>
inline void edit(const std::string& path, F change) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  change(file);
  H5Fclose(file);
}

// Replaces the string attribute `name` of `object` by `value`.
inline void set_string(hid_t file, const std::string& object, const std::string& name, const std::string& value) {
  H5Adelete_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate_by_name(file, object.c_str(), name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(attr >= 0);
  H5Awrite(attr, type, value.data());
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

// Records the rank files' new sizes and SHA-256 in the manifest (stored again with its own
// SHA-256), as the writer would have: a buggy writer's checkpoint is consistent. `also` changes the
// manifest further before it is stored (e.g. drops a field an older writer did not write).
inline void restamp(const std::string& folder, const std::function<void(nlohmann::json&)>& also = {}) {
  const std::string index = folder + "/index.h5";
  edit(index, [&](hid_t f) {
    const hid_t attr = H5Aopen(f, "manifest", H5P_DEFAULT);
    const hid_t type = H5Aget_type(attr);
    std::string text(H5Tget_size(type), '\0');
    H5Aread(attr, type, text.data());
    H5Tclose(type);
    H5Aclose(attr);
    text.resize(text.find_last_not_of('\0') + 1);
    nlohmann::json manifest = nlohmann::json::parse(text);
    for (auto& file : manifest["files"]) {
      const std::string path = folder + "/" + file["name"].get<std::string>();
      std::ifstream in(path, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      file["bytes"] = bytes.size();
      file["sha256"] = shardtrain::to_hex(shardtrain::sha256(bytes.data(), bytes.size()));
    }
    if (also) also(manifest);
    text = manifest.dump();
    set_string(f, "/", "manifest", text);
    set_string(f, "/", "manifest_sha256", shardtrain::to_hex(shardtrain::sha256(text.data(), text.size())));
  });
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace shardtrain::test::ckpt_fixture
