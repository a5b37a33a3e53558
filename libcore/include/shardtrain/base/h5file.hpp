// A thin RAII layer over the HDF5 C API for whole-dataset reads and writes by path, plus scalar
// attributes. Every failure throws IoError (missing/unreadable file) or UsageError (a missing or
// mistyped object) naming the file and the object, never an HDF5 error stack on stderr.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain {

class H5File {
 public:
  enum class Mode { kRead, kCreate /* truncates */ };
  H5File(const std::string& path, Mode mode);
  ~H5File();
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;

  const std::string& path() const { return path_; }
  bool exists(const std::string& object_path) const;

  // Reads a whole dataset, converting to the requested element type; `dims` gets its shape.
  std::vector<float> read_floats(const std::string& dataset, std::vector<std::int64_t>* dims = nullptr) const;
  std::vector<double> read_doubles(const std::string& dataset, std::vector<std::int64_t>* dims = nullptr) const;
  std::vector<std::int32_t> read_ints(const std::string& dataset, std::vector<std::int64_t>* dims = nullptr) const;

  // Writes a dataset (creating intermediate groups).
  void write_floats(const std::string& dataset, const std::vector<float>& data, const std::vector<std::int64_t>& dims);
  // The same from host memory holding the product of `dims` floats (no copy of them is made).
  void write_floats(const std::string& dataset, const float* data, const std::vector<std::int64_t>& dims);

  // Root-group (or object) scalar attributes.
  double read_attr_double(const std::string& name, const std::string& object = "/") const;
  std::int64_t read_attr_int(const std::string& name, const std::string& object = "/") const;
  std::string read_attr_string(const std::string& name, const std::string& object = "/") const;
  void write_attr(const std::string& name, double value, const std::string& object = "/");
  void write_attr(const std::string& name, std::int64_t value, const std::string& object = "/");
  void write_attr(const std::string& name, const std::string& value, const std::string& object = "/");

  // Names of the members of a group (sorted as HDF5 lists them: by name).
  std::vector<std::string> list(const std::string& group) const;

  // Every dataset under `group` (recursively, through nested groups), sorted by path. `path` is
  // relative to `group` ("h.0.attn.qkv.weight" under "params"; "params/h.0..." under "/").
  // `type_class` is 'f' (floating point), 'i' (integer) or '?' (anything else: strings, compounds);
  // `element_bytes` is the stored element size. Throws UsageError when `group` is not a group.
  struct DatasetInfo {
    std::string path;
    std::vector<std::int64_t> dims;
    char type_class = '?';
    std::size_t element_bytes = 0;
  };
  std::vector<DatasetInfo> list_datasets(const std::string& group = "/") const;

 private:
  std::string path_;
  std::int64_t file_ = -1;  // hid_t
};

}  // namespace shardtrain
