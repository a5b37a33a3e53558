#include "h5_detail.hpp"

namespace shardtrain::h5detail {

void quiet_hdf5() {
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

Handle vlen_string_type(H5T_cset_t cset) {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), cset);
  return t;
}

void delete_attr(hid_t loc, const std::string& object, const std::string& name) {
  if (H5Aexists_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT);
}

WriteResult write_attr(hid_t loc, const std::string& object, const std::string& name, hid_t file_type,
                       hid_t space, hid_t mem_type, const void* data) {
  Handle attr(H5Acreate_by_name(loc, object.c_str(), name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT,
                                H5P_DEFAULT),
              H5Aclose);
  if (!attr.ok()) return WriteResult::kCreateFailed;
  if (data && H5Awrite(attr.get(), mem_type, data) < 0) return WriteResult::kWriteFailed;
  return WriteResult::kOk;
}

WriteResult write_string_attr(hid_t loc, const std::string& object, const std::string& name,
                              const std::string& value, H5T_cset_t cset, H5T_str_t pad) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  H5Tset_cset(type.get(), cset);
  H5Tset_strpad(type.get(), pad);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  return write_attr(loc, object, name, type.get(), space.get(), type.get(), padded.data());
}

Handle open_attr(hid_t loc, const std::string& object, const std::string& name) {
  return Handle(H5Aopen_by_name(loc, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
}

bool is_string(hid_t attr) {
  Handle type(H5Aget_type(attr), H5Tclose);
  return H5Tget_class(type.get()) == H5T_STRING;
}

std::optional<std::string> read_string(hid_t attr, const StringRead& how) {
  Handle type(H5Aget_type(attr), H5Tclose);
  if (H5Tis_variable_str(type.get()) > 0) {
    Handle mem = vlen_string_type(how.vlen_cset);
    char* value = nullptr;
    if (H5Aread(attr, mem.get(), &value) < 0) return std::nullopt;
    if (!value) {
      if (how.vlen_null_is_empty) return std::string();
      return std::nullopt;
    }
    std::string out(value);
    H5free_memory(value);
    return out;
  }
  // Fixed length, possibly without a terminating NUL: read size bytes, then trim the padding.
  std::string out(H5Tget_size(type.get()), '\0');
  if (H5Aread(attr, type.get(), out.data()) < 0) return std::nullopt;
  switch (how.fixed_trim) {
    case StringRead::kTrailingNuls:
      while (!out.empty() && out.back() == '\0') out.pop_back();
      break;
    case StringRead::kTrailingNulsOrSpaces:
      while (!out.empty() && (out.back() == '\0' || out.back() == ' ')) out.pop_back();
      break;
    case StringRead::kFromFirstNul:
      if (const std::size_t nul = out.find('\0'); nul != std::string::npos) out.resize(nul);
      break;
  }
  return out;
}

std::optional<std::vector<std::string>> list_group(hid_t loc, const std::string& group) {
  Handle g(H5Gopen2(loc, group.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.ok()) return std::nullopt;
  H5G_info_t info;
  if (H5Gget_info(g.get(), &info) < 0) return std::nullopt;
  std::vector<std::string> names;
  names.reserve(info.nlinks);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (len < 0) continue;
    std::string name(std::size_t(len), '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), std::size_t(len) + 1, H5P_DEFAULT);
    names.push_back(name);
  }
  return names;
}

}  // namespace shardtrain::h5detail
