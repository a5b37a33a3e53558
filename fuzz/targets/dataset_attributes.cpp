// Fuzz target: a dataset file's root attributes and document table (data-prep's output, read by
// every trainer and by release-gate), through data::DatasetReader::open and a read of every
// document. HDF5's own parser of the file's bytes is third-party and not the target: the input is
// a JSON object of changes made, through the HDF5 API, to a small valid dataset written by
// DatasetWriter:
//   {"attrs":   {"<root attribute>": number | string, ...},   integral numbers are stored int64
//    "columns": {"documents/offset": [n, ...], ...},           1-D int64 datasets, replaced whole
//    "extents": {"tokens": n, "documents/id": n, ...}}         extendible datasets made n rows long
//                                                              (rows never written: zeros, not stored)
// (an input that is no such object changes nothing). Every read must return the exact documents
// or throw a typed error naming the file.
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fuzz_target.hpp"
#include "shardtrain/data/dataset.hpp"

namespace {

using nlohmann::json;

const std::string& base_dataset() {
  static const std::string path = [] {
    const std::string p = shardtrain::fuzz::scratch_dir() + "/base-dataset.h5";
    shardtrain::data::DatasetWriter writer(p, 256, "bytes", 0);
    const std::string texts[] = {"first document", "second", "the third and last document"};
    std::int64_t t = 1700000000;
    for (const std::string& text : texts) {
      const std::vector<std::uint8_t> bytes(text.begin(), text.end());
      writer.add_document("doc-" + std::to_string(t), 1, t, t + 10, "owner", bytes);
      t += 100;
    }
    writer.finish();
    return p;
  }();
  return path;
}

void set_attribute(hid_t file, const std::string& name, const json& value) {
  if (H5Aexists(file, name.c_str()) > 0) H5Adelete(file, name.c_str());
  hid_t space = H5Screate(H5S_SCALAR);
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, text.empty() ? 1 : text.size());
    H5Tset_cset(type, H5T_CSET_UTF8);
    hid_t a = H5Acreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
      const std::string padded = text.empty() ? std::string(1, '\0') : text;
      H5Awrite(a, type, padded.data());
      H5Aclose(a);
    }
    H5Tclose(type);
  } else if (value.is_number_integer() || value.is_number_unsigned()) {
    const std::int64_t v = value.is_number_unsigned() ? std::int64_t(value.get<std::uint64_t>()) : value.get<std::int64_t>();
    hid_t a = H5Acreate2(file, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
      H5Awrite(a, H5T_NATIVE_INT64, &v);
      H5Aclose(a);
    }
  } else if (value.is_number_float()) {
    const double v = value.get<double>();
    hid_t a = H5Acreate2(file, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
      H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
      H5Aclose(a);
    }
  }
  H5Sclose(space);
}

void set_column(hid_t file, const std::string& name, const json& values) {
  if (!values.is_array() || values.size() > 64) return;
  std::vector<std::int64_t> v;
  for (const json& x : values) v.push_back(x.is_number_integer() ? x.get<std::int64_t>() :
                                           x.is_number_unsigned() ? std::int64_t(x.get<std::uint64_t>()) : 0);
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) return;
  H5Ldelete(file, name.c_str(), H5P_DEFAULT);
  const hsize_t n = v.size();
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(file, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (d >= 0) {
    if (n > 0) H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d);
  }
  H5Sclose(space);
}

void set_extent(hid_t file, const std::string& name, const json& rows) {
  if (!rows.is_number_unsigned() && !rows.is_number_integer()) return;
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) return;
  hid_t d = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (d < 0) return;
  hid_t space = H5Dget_space(d);
  hsize_t dims[2] = {0, 0};
  if (H5Sget_simple_extent_ndims(space) <= 2 && H5Sget_simple_extent_dims(space, dims, nullptr) >= 1) {
    dims[0] = hsize_t(rows.is_number_unsigned() ? rows.get<std::uint64_t>() : std::uint64_t(rows.get<std::int64_t>()));
    H5Dset_extent(d, dims);  // fails on a fixed-size dataset: then nothing changes
  }
  H5Sclose(space);
  H5Dclose(d);
}

}  // namespace

SHARDTRAIN_FUZZ_TARGET(dataset_attributes) {
  using namespace shardtrain;
  const json changes = json::parse(fuzz::as_text(data, size), nullptr, false);
  const std::string path = fuzz::scratch_dir() + "/dataset.h5";
  fuzz::copy_fixture(base_dataset(), path);
  if (changes.is_object()) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0) std::abort();
    if (auto it = changes.find("attrs"); it != changes.end() && it->is_object())
      for (const auto& [name, value] : it->items()) set_attribute(file, name, value);
    if (auto it = changes.find("columns"); it != changes.end() && it->is_object())
      for (const auto& [name, values] : it->items()) set_column(file, name, values);
    if (auto it = changes.find("extents"); it != changes.end() && it->is_object())
      for (const auto& [name, rows] : it->items()) set_extent(file, name, rows);
    H5Fclose(file);
  }
  fuzz::expect_reader_contract(path, [&] {
    const data::DatasetReader reader = data::DatasetReader::open(path);
    for (std::size_t i = 0; i < reader.documents().size(); ++i) (void)reader.read_document(i);
  });
}
