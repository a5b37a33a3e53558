// Dataset file reader (HDF5 C API): the header, the document table and the tokens, every size a
// file declares checked against what it stores before anything is allocated.
#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <optional>

#include "base/h5_detail.hpp"
#include "dataset_h5.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/data/dataset.hpp"

namespace shardtrain::data {
namespace {
using namespace dataset_h5;

// A damaged or hostile file can declare a column far longer than it holds: an extendible HDF5
// dataset reads its never-written rows as zeros, and zeros compress a thousandfold. Readers size
// their buffers by the declared rows, so they check first (issue 50: cap before allocating) that
// the bytes the file stores for the column can hold them: every byte when the column has no
// filters; at most kMostBytesPerDeflatedByte per stored byte when it is compressed (DEFLATE's
// largest ratio: a 258-byte match coded in 2 bits; shuffle, the other filter written here, does
// not change the size). A genuine file always passes; a refused one costs no allocation.
constexpr double kMostBytesPerDeflatedByte = 1032;
void check_column_stored(const std::string& path, hid_t dset, const std::string& name, hsize_t rows,
                         std::size_t row_bytes) {
  if (rows == 0) return;
  Hid dcpl(H5Dget_create_plist(dset), H5Pclose);
  const bool filtered = dcpl.ok() && H5Pget_nfilters(dcpl.get()) > 0;
  const double stored = double(H5Dget_storage_size(dset));
  const double declared = double(rows) * double(row_bytes);
  if (declared > stored * (filtered ? kMostBytesPerDeflatedByte : 1.0))
    throw UsageError(path + ": /" + name + " declares " + std::to_string(rows) + " rows (" +
                     std::to_string(std::uint64_t(declared)) + " bytes) but the file stores only " +
                     std::to_string(std::uint64_t(stored)) + " bytes of it" + (filtered ? " compressed" : "") +
                     ": the dataset file is damaged; write it again with data-prep");
}

template <class T>
std::vector<T> read_column(const std::string& path, hid_t file, const char* name, hid_t mem_type,
                           std::size_t expect_rows, std::size_t width = 1) {
  Hid d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!d.ok()) throw UsageError(path + ": dataset file lacks /" + name);
  Hid space(H5Dget_space(d.get()), H5Sclose);
  hsize_t dims[2] = {0, 0};
  // At most two dimensions: H5Sget_simple_extent_dims writes as many as the dataset has.
  if (H5Sget_simple_extent_ndims(space.get()) > 2) throw UsageError(path + ": /" + name + " has more than 2 dimensions");
  int rank = H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  if (rank < 1 || dims[0] != expect_rows || (width > 1 && (rank != 2 || dims[1] != width)) ||
      (width == 1 && rank != 1))
    throw UsageError(path + ": /" + name + " has " + std::to_string(dims[0]) + " rows, expected " +
                     std::to_string(expect_rows));
  {
    Hid stored_type(H5Dget_type(d.get()), H5Tclose);
    check_column_stored(path, d.get(), name, expect_rows, width * H5Tget_size(stored_type.get()));
  }
  std::vector<T> out(expect_rows * width);
  if (expect_rows > 0)
    check(H5Dread(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
          path + ": cannot read /" + name);
  return out;
}

std::vector<std::string> read_string_column(const std::string& path, hid_t file, const char* name,
                                            std::size_t expect_rows) {
  Hid d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!d.ok()) throw UsageError(path + ": dataset file lacks /" + name);
  Hid space(H5Dget_space(d.get()), H5Sclose);
  hsize_t n = 0;
  if (H5Sget_simple_extent_ndims(space.get()) != 1) throw UsageError(path + ": /" + name + " is not a column");
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  if (n != expect_rows)
    throw UsageError(path + ": /" + name + " has " + std::to_string(n) + " rows, expected " +
                     std::to_string(expect_rows));
  // A column of another type (numbers where strings belong) fails the read below, and HDF5 would
  // then write into ptrs whatever it converted: refuse it before, naming the column.
  {
    Hid stored(H5Dget_type(d.get()), H5Tclose);
    if (H5Tget_class(stored.get()) != H5T_STRING) throw UsageError(path + ": /" + name + " is not a string column");
    check_column_stored(path, d.get(), name, n, H5Tget_size(stored.get()));
  }
  std::vector<std::string> out;
  out.reserve(n);
  if (n == 0) return out;
  Hid mtype = vlen_string_type();
  std::vector<char*> ptrs(n, nullptr);
  check(H5Dread(d.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()),
        path + ": cannot read /" + name);
  for (char* p : ptrs) out.emplace_back(p ? p : "");
  H5Dvlen_reclaim(mtype.get(), space.get(), H5P_DEFAULT, ptrs.data());
  return out;
}

// The rows of a one-dimensional dataset (nullopt when the file has none by that name).
std::optional<std::size_t> rows_of(hid_t file, const char* name) {
  Hid d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!d.ok()) return std::nullopt;
  Hid s(H5Dget_space(d.get()), H5Sclose);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(s.get(), &n, nullptr);
  return std::size_t(n);
}

// The root attributes, each one checked: the format and its version, then the sizes.
DatasetHeader read_header(const std::string& path, hid_t f) {
  auto format = read_attr_str(f, "format");
  if (!format || *format != kDatasetFormatName)
    throw UsageError(path + ": not a shardtrain dataset (root attribute format != \"" +
                     std::string(kDatasetFormatName) + "\")");
  auto version = read_attr<int64_t>(f, "format_version");
  if (!version || *version != kDatasetFormatVersion)
    throw UsageError(path + ": dataset format_version " + (version ? std::to_string(*version) : "missing") +
                     " is not supported (this build reads version " + std::to_string(kDatasetFormatVersion) + ")");
  auto need_i64 = [&](const char* name) {
    auto v = read_attr<int64_t>(f, name);
    if (!v) throw UsageError(path + ": missing attribute " + name);
    return *v;
  };
  auto need_str = [&](const char* name) {
    auto v = read_attr_str(f, name);
    if (!v) throw UsageError(path + ": missing attribute " + name);
    return *v;
  };
  DatasetHeader h;
  h.format_version = int(*version);
  h.vocab = need_i64("vocab");
  h.tokenizer = need_str("tokenizer");
  h.separator_token = need_i64("separator_token");
  h.token_bits = int(need_i64("token_bits"));
  h.num_documents = uint64_t(need_i64("num_documents"));
  h.num_tokens = uint64_t(need_i64("num_tokens"));
  h.snapshot_id = need_str("snapshot_id");
  h.created_by = read_attr_str(f, "created_by").value_or("");
  if (const int64_t bits = need_i64("token_bits"); bits != 8 && bits != 16 && bits != 32)
    throw UsageError(path + ": attribute token_bits is " + std::to_string(bits) + ", not 8, 16 or 32");
  return h;
}

// /tokens, opened. The tokens the file holds, as HDF5 stores them: num_tokens must say the same,
// since every range check below and in read_tokens is against num_tokens (a larger one would send
// reads past the data and size their buffers by it).
Hid open_tokens(const std::string& path, hid_t f, const DatasetHeader& header) {
  Hid tokens(H5Dopen2(f, "tokens", H5P_DEFAULT), H5Dclose);
  if (!tokens.ok()) throw UsageError(path + ": missing /tokens");
  Hid space(H5Dget_space(tokens.get()), H5Sclose);
  hsize_t stored = 0;
  if (H5Sget_simple_extent_ndims(space.get()) != 1) throw UsageError(path + ": /tokens is not one-dimensional");
  // read_tokens_stored copies at token_bits: a wider stored type would be narrowed in silence.
  Hid type(H5Dget_type(tokens.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) * 8 != std::size_t(header.token_bits))
    throw UsageError(path + ": /tokens is not stored as " + std::to_string(header.token_bits) +
                     "-bit integers, as attribute token_bits says");
  H5Sget_simple_extent_dims(space.get(), &stored, nullptr);
  const auto declared = int64_t(header.num_tokens);  // as the file wrote it: a negative one fails here too
  if (declared < 0 || stored != header.num_tokens)
    throw UsageError(path + ": attribute num_tokens is " + std::to_string(declared) + " but /tokens holds " +
                     std::to_string(stored) + " tokens");
  // A document read is sized by its length, at most num_tokens: the file must hold them.
  check_column_stored(path, tokens.get(), "tokens", stored, std::size_t(header.token_bits / 8));
  return tokens;
}

// The document table's columns, as records (their owners and token ranges not yet checked).
std::vector<DocumentRecord> read_documents(const std::string& path, hid_t f, std::size_t D) {
  auto ids = read_string_column(path, f, "documents/id", D);
  auto versions = read_column<int64_t>(path, f, "documents/version", H5T_NATIVE_INT64, D);
  auto offsets = read_column<uint64_t>(path, f, "documents/offset", H5T_NATIVE_UINT64, D);
  auto lengths = read_column<uint64_t>(path, f, "documents/length", H5T_NATIVE_UINT64, D);
  auto events = read_column<int64_t>(path, f, "documents/event_time", H5T_NATIVE_INT64, D);
  auto avails = read_column<int64_t>(path, f, "documents/available_time", H5T_NATIVE_INT64, D);
  auto owners = read_column<uint32_t>(path, f, "documents/owner", H5T_NATIVE_UINT32, D);
  auto hashes = read_column<uint8_t>(path, f, "documents/token_sha256", H5T_NATIVE_UINT8, D, 32);
  std::vector<DocumentRecord> documents(D);
  for (std::size_t i = 0; i < D; ++i) {
    auto& d = documents[i];
    d.id = std::move(ids[i]);
    d.version = versions[i];
    d.offset = offsets[i];
    d.length = lengths[i];
    d.event_time = events[i];
    d.available_time = avails[i];
    d.owner = owners[i];
    std::memcpy(d.token_sha256.data(), hashes.data() + 32 * i, 32);
  }
  return documents;
}

// Every document's owner within the owner table and its tokens within /tokens.
void check_documents(const std::string& path, const std::vector<DocumentRecord>& documents, std::size_t owner_count,
                     std::uint64_t num_tokens) {
  for (std::size_t i = 0; i < documents.size(); ++i) {
    const auto& d = documents[i];
    if (d.owner >= owner_count || d.offset > num_tokens || d.length > num_tokens - d.offset)
      throw UsageError(path + ": document " + std::to_string(i) + " (" + d.id +
                       ") has an owner or token range outside the file's tables");
  }
}

// The source files the dataset was prepared from (none in a file without /sources).
std::vector<SourceRecord> read_sources(const std::string& path, hid_t f) {
  std::vector<SourceRecord> sources;
  if (H5Lexists(f, "sources", H5P_DEFAULT) <= 0) return sources;
  const std::size_t n = rows_of(f, "sources/path").value_or(0);
  auto paths = read_string_column(path, f, "sources/path", n);
  auto shas = read_string_column(path, f, "sources/sha256", n);
  auto bytes = read_column<uint64_t>(path, f, "sources/bytes", H5T_NATIVE_UINT64, n);
  for (std::size_t i = 0; i < n; ++i) sources.push_back({paths[i], shas[i], bytes[i]});
  return sources;
}

}  // namespace

// ================================ reader ======================================================
struct DatasetReader::Impl {
  std::string path;
  Hid file, tokens;
  DatasetHeader header;
  std::vector<DocumentRecord> documents;
  std::vector<std::string> owners;
  std::vector<SourceRecord> sources;
};

DatasetReader::DatasetReader() : impl_(std::make_unique<Impl>()) {}
DatasetReader::DatasetReader(DatasetReader&&) noexcept = default;
DatasetReader& DatasetReader::operator=(DatasetReader&&) noexcept = default;
DatasetReader::~DatasetReader() = default;

DatasetReader DatasetReader::open(const std::string& path) {
  quiet_hdf5();
  DatasetReader r;
  auto& m = *r.impl_;
  m.path = path;
  if (!std::filesystem::exists(path)) throw IoError("dataset file " + path + " does not exist");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw UsageError(path + ": not an HDF5 file (expected a shardtrain dataset)");
  m.file = Hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!m.file.ok()) throw IoError("cannot open dataset file " + path);
  const hid_t f = m.file.get();
  m.header = read_header(path, f);
  m.tokens = open_tokens(path, f, m.header);
  if (const auto documents = int64_t(m.header.num_documents); documents < 0)
    throw UsageError(path + ": attribute num_documents is " + std::to_string(documents));
  m.documents = read_documents(path, f, m.header.num_documents);
  const std::optional<std::size_t> owner_rows = rows_of(f, "owners/name");
  if (!owner_rows) throw UsageError(path + ": missing /owners/name");
  m.owners = read_string_column(path, f, "owners/name", *owner_rows);
  check_documents(path, m.documents, m.owners.size(), m.header.num_tokens);
  m.sources = read_sources(path, f);
  return r;
}

const std::string& DatasetReader::path() const { return impl_->path; }
const DatasetHeader& DatasetReader::header() const { return impl_->header; }
const std::vector<DocumentRecord>& DatasetReader::documents() const { return impl_->documents; }
const std::vector<std::string>& DatasetReader::owners() const { return impl_->owners; }
const std::vector<SourceRecord>& DatasetReader::sources() const { return impl_->sources; }

std::optional<double> DatasetReader::double_attribute(const std::string& name) const {
  quiet_hdf5();
  return read_attr<double>(impl_->file.get(), name.c_str());
}

namespace {
void read_token_range(const std::string& path, hid_t dset, uint64_t num_tokens, uint64_t offset,
                      uint64_t count, hid_t mem_type, void* out) {
  if (offset + count > num_tokens || offset + count < offset)
    throw UsageError(path + ": token range [" + std::to_string(offset) + ", " +
                     std::to_string(offset + count) + ") is outside /tokens (" +
                     std::to_string(num_tokens) + " tokens)");
  if (count == 0) return;
  quiet_hdf5();
  Hid fspace(H5Dget_space(dset), H5Sclose);
  hsize_t start = offset, n = count;
  H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr);
  Hid mspace(H5Screate_simple(1, &n, nullptr), H5Sclose);
  check(H5Dread(dset, mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, out),
        path + ": cannot read tokens");
}
}  // namespace

std::optional<std::string> DatasetReader::string_attribute(const std::string& name) const {
  quiet_hdf5();
  return read_attr_str(impl_->file.get(), name.c_str());
}

void DatasetReader::read_tokens_stored(uint64_t offset, uint64_t count, void* out) const {
  read_token_range(impl_->path, impl_->tokens.get(), impl_->header.num_tokens, offset, count,
                   token_mem_type(impl_->header.token_bits), out);
}

void DatasetReader::read_tokens(uint64_t offset, uint64_t count, uint32_t* out) const {
  read_token_range(impl_->path, impl_->tokens.get(), impl_->header.num_tokens, offset, count,
                   H5T_NATIVE_UINT32, out);
}

std::vector<uint32_t> DatasetReader::read_document(std::size_t index) const {
  const auto& d = impl_->documents.at(index);
  std::vector<uint32_t> out(d.length);
  read_tokens(d.offset, d.length, out.data());
  return out;
}

}  // namespace shardtrain::data
