// Fuzz target: a rank file's piece table (rank_<r>.h5: /pieces/<tensor>/<offset> datasets, each with
// its offset and tensor_numel attributes, its element type and extent), through ckpt::CheckpointReader
// (which maps every piece onto its tensor and checks the cover) and reads of every tensor, whole and
// in parts. The input is a JSON object of changes made through the HDF5 API to one rank file of a
// small real checkpoint (ckpt_fixture.hpp; the manifest is then re-stamped with the file's new size
// and SHA-256, so the changes get past the hash checks, as a buggy writer's file would):
//   {"file": 0 | 1,                                         the rank file (default 0)
//    "pieces": {"<tensor>/<piece>": null,                   removes the piece
//               "<tensor>/<piece>": {"as": "float64",       stored as another type (same values,
//                                                           converted by HDF5), or "string"
//                                    "extent": [dims],      another extent (values repeated or cut)
//                                    "rename": "<tensor>/<name>",  moved (groups made as needed)
//                                    "<attribute>": value}},       e.g. "offset": 7
//    "groups": {"<tensor>": null},                          removes /pieces/<tensor>
//    "root": {"<attribute>": value},                        the file's root attributes
//    "manifest": {merge patch}}
// The reader must give exactly the tensors written, or one typed error naming the checkpoint.
#include <hdf5.h>

#include <algorithm>
#include <optional>

#include "ckpt_fixture.hpp"
#include "fuzz_target.hpp"

namespace {

using nlohmann::json;
namespace cf = shardtrain::fuzz::ckpt_fixture;

bool plain_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name.front() == '/' || name.back() == '/') return false;
  for (std::size_t at = 0;;) {  // no empty, "." or ".." component
    const std::size_t end = std::min(name.find('/', at), name.size());
    const std::string part = name.substr(at, end - at);
    if (part.empty() || part == "." || part == "..") return false;
    if (end == name.size()) return true;
    at = end + 1;
  }
}

hid_t file_type_named(const std::string& name) {
  if (name == "float32") return H5Tcopy(H5T_IEEE_F32LE);
  if (name == "float64") return H5Tcopy(H5T_IEEE_F64LE);
  if (name == "int32") return H5Tcopy(H5T_STD_I32LE);
  if (name == "int64") return H5Tcopy(H5T_STD_I64LE);
  if (name == "uint64") return H5Tcopy(H5T_STD_U64LE);
  if (name == "uint8") return H5Tcopy(H5T_STD_U8LE);
  if (name == "float32be") return H5Tcopy(H5T_IEEE_F32BE);
  if (name == "string") {
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 8);
    return t;
  }
  return -1;
}

// Recreates the piece dataset `object` with another stored type and/or extent, holding its values
// (as doubles, converted back by HDF5 on write; repeated or cut to the new extent) and its
// attributes offset and tensor_numel.
void recreate(hid_t file, const std::string& object, const json& change) {
  const hid_t old = H5Dopen2(file, object.c_str(), H5P_DEFAULT);
  if (old < 0) return;
  const hid_t old_space = H5Dget_space(old);
  const hssize_t count = H5Sget_simple_extent_npoints(old_space);
  H5Sclose(old_space);
  std::vector<double> values(std::size_t(std::max<hssize_t>(count, 0)));
  if (!values.empty()) H5Dread(old, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  std::optional<std::int64_t> offset, tensor_numel;
  for (const char* name : {"offset", "tensor_numel"}) {
    const hid_t a = H5Aopen(old, name, H5P_DEFAULT);
    std::int64_t v = 0;
    if (a >= 0 && H5Aread(a, H5T_NATIVE_INT64, &v) >= 0) (std::string(name) == "offset" ? offset : tensor_numel) = v;
    if (a >= 0) H5Aclose(a);
  }
  hid_t type = H5Dget_type(old);
  H5Dclose(old);
  if (auto as = change.find("as"); as != change.end() && as->is_string()) {
    const hid_t other = file_type_named(as->get<std::string>());
    if (other >= 0) {
      H5Tclose(type);
      type = other;
    }
  }
  std::vector<hsize_t> extent = {hsize_t(values.size())};
  if (auto dims = change.find("extent"); dims != change.end() && dims->is_array() && dims->size() <= 4) {
    extent.clear();
    for (const json& d : *dims)
      extent.push_back(d.is_number_unsigned() ? hsize_t(std::min<std::uint64_t>(d.get<std::uint64_t>(), 256)) : 0);
  }
  hsize_t n = 1;
  for (hsize_t d : extent) n *= d;
  if (n > 4096) {  // small changes only (the extent's elements are written)
    H5Tclose(type);
    return;
  }
  std::vector<double> stored(n);
  for (hsize_t i = 0; i < n; ++i) stored[i] = values.empty() ? 0.0 : values[i % values.size()];
  H5Ldelete(file, object.c_str(), H5P_DEFAULT);
  const hid_t space = extent.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(extent.size()), extent.data(), nullptr);
  const hid_t d = H5Dcreate2(file, object.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (d >= 0) {
    if (n > 0 && H5Tget_class(type) != H5T_STRING)
      H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, stored.data());
    if (offset) cf::set_attribute(d, ".", "offset", *offset);
    if (tensor_numel) cf::set_attribute(d, ".", "tensor_numel", *tensor_numel);
    H5Dclose(d);
  }
  H5Sclose(space);
  H5Tclose(type);
}

void change_piece(hid_t file, const std::string& name, const json& change) {
  std::string object = "/pieces/" + name;
  if (change.is_null()) {
    H5Ldelete(file, object.c_str(), H5P_DEFAULT);
    return;
  }
  if (!change.is_object() || H5Lexists(file, "/pieces", H5P_DEFAULT) <= 0) return;
  if (change.contains("as") || change.contains("extent")) recreate(file, object, change);
  if (auto to = change.find("rename"); to != change.end() && to->is_string() && plain_name(to->get<std::string>())) {
    const std::string target = "/pieces/" + to->get<std::string>();
    const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (H5Lmove(file, object.c_str(), file, target.c_str(), lcpl, H5P_DEFAULT) >= 0) object = target;
    H5Pclose(lcpl);
  }
  if (H5Oexists_by_name(file, object.c_str(), H5P_DEFAULT) <= 0) return;
  for (const auto& [attribute, value] : change.items())
    if (attribute != "as" && attribute != "extent" && attribute != "rename") cf::set_attribute(file, object, attribute, value);
}

}  // namespace

SHARDTRAIN_FUZZ_TARGET(ckpt_pieces) {
  const json changes = json::parse(shardtrain::fuzz::as_text(data, size), nullptr, false);
  const std::string folder = cf::fresh_copy();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (changes.is_object()) {
    const bool second = changes.value("file", json(0)) == 1;
    const std::string rank_file = folder + (second ? "/rank_00001.h5" : "/rank_00000.h5");
    const hid_t file = H5Fopen(rank_file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0) cf::fixture_finding("cannot open the copy's " + rank_file);
    if (auto it = changes.find("pieces"); it != changes.end() && it->is_object())
      for (const auto& [name, change] : it->items())
        if (plain_name(name)) change_piece(file, name, change);
    if (auto it = changes.find("groups"); it != changes.end() && it->is_object())
      for (const auto& [name, change] : it->items())
        if (plain_name(name) && name.find('/') == std::string::npos && change.is_null())
          H5Ldelete(file, ("/pieces/" + name).c_str(), H5P_DEFAULT);
    if (auto it = changes.find("root"); it != changes.end() && it->is_object())
      for (const auto& [attribute, value] : it->items()) cf::set_attribute(file, "/", attribute, value);
    H5Fclose(file);
    cf::restamp(folder, changes.value("manifest", json::object()));
  }
  cf::read_back(folder);
}
