// Fuzz target: a checkpoint's index (index.h5: its root attributes and the tensor table /tensors,
// each tensor's shape, dtype, numel and sum64 checksum), through ckpt::CheckpointReader, the reader
// every resume, ckpt-reshard, equiv-check and release-gate goes through, and a read of every tensor.
// The input is a JSON object of changes made through the HDF5 API to a small real checkpoint
// (ckpt_fixture.hpp: its manifest is then re-stamped, so the changes get past the SHA-256 checks):
//   {"tensors": {"<name>": {"<attribute>": value, ...} | null,   null removes the tensor
//                "<name>": {"extent": [dims], ...}},             a plain dataset of these dims (and
//                                                                the tensor's type) instead of the
//                                                                virtual one
//    "manifest": {merge patch},                                  e.g. {"files": [...], "writers": 1}
//    "root": {"<attribute>": value, ...}}                        after the re-stamp (so it may break it)
// (attribute values as ckpt_fixture's set_attribute stores them; anything else changes nothing).
// The reader must give exactly the tensors written, or one typed error naming the checkpoint.
#include <hdf5.h>

#include "ckpt_fixture.hpp"
#include "fuzz_target.hpp"

namespace {

using nlohmann::json;
namespace cf = shardtrain::fuzz::ckpt_fixture;

// Replaces /tensors/<name> by a plain dataset (no attributes) of `dims` (at most 4 of at most 64
// each, so the change stays small) storing the type the base's tensor has; returns the extent
// (empty: nothing replaced).
std::vector<hsize_t> replace_with_plain(hid_t file, const std::string& name, const json& dims) {
  if (!dims.is_array() || dims.empty() || dims.size() > 4 || !cf::base_state().count(name)) return {};
  std::vector<hsize_t> extent;
  for (const json& d : dims) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > 64) return {};
    extent.push_back(hsize_t(d.get<std::uint64_t>()));
  }
  const std::string object = "/tensors/" + name;
  H5Ldelete(file, object.c_str(), H5P_DEFAULT);
  const shardtrain::DType dtype = cf::base_state().at(name).spec.dtype;
  const hid_t type = dtype == shardtrain::DType::kFloat64 ? H5T_IEEE_F64LE
                     : dtype == shardtrain::DType::kInt64 ? H5T_STD_I64LE
                                                          : H5T_IEEE_F32LE;
  const hid_t space = H5Screate_simple(int(extent.size()), extent.data(), nullptr);
  const hid_t d = H5Dcreate2(file, object.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (d >= 0) H5Dclose(d);
  H5Sclose(space);
  return d >= 0 ? extent : std::vector<hsize_t>{};
}

}  // namespace

SHARDTRAIN_FUZZ_TARGET(ckpt_index) {
  const json changes = json::parse(shardtrain::fuzz::as_text(data, size), nullptr, false);
  const std::string folder = cf::fresh_copy();
  const std::string index = folder + "/index.h5";
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  std::map<std::string, std::vector<hsize_t>> replaced;  // tensors whose dataset is now plain, with its extent
  if (changes.is_object()) {
    if (auto it = changes.find("tensors"); it != changes.end() && it->is_object()) {
      const hid_t file = H5Fopen(index.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      if (file < 0) cf::fixture_finding("cannot open the copy's index");
      for (const auto& [name, change] : it->items()) {
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") continue;
        const std::string object = "/tensors/" + name;
        if (change.is_null()) {
          H5Ldelete(file, object.c_str(), H5P_DEFAULT);
          continue;
        }
        if (!change.is_object()) continue;
        if (auto extent = change.find("extent"); extent != change.end())
          if (auto dims = replace_with_plain(file, name, *extent); !dims.empty()) replaced[name] = dims;
        if (H5Lexists(file, object.c_str(), H5P_DEFAULT) <= 0) continue;
        for (const auto& [attribute, value] : change.items())
          if (attribute != "extent") cf::set_attribute(file, object, attribute, value);
      }
      H5Fclose(file);
    }
    const json patch = changes.value("manifest", json::object());
    cf::restamp(folder, patch);
    if (auto it = changes.find("root"); it != changes.end() && it->is_object()) {
      const hid_t file = H5Fopen(index.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      if (file < 0) cf::fixture_finding("cannot open the copy's index");
      for (const auto& [attribute, value] : it->items()) cf::set_attribute(file, "/", attribute, value);
      H5Fclose(file);
    }
  }
  cf::read_back(folder, replaced);
}
