// Dataset file writer (HDF5 C API) and the format helpers; the reader is dataset_reader.cpp.
#include "shardtrain/data/dataset.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "base/h5_detail.hpp"
#include "dataset_h5.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"

namespace shardtrain::data {

// ================================ format helpers ==============================================
int token_bits_for_vocab(int64_t vocab) {
  if (vocab < 1 || vocab > (int64_t(1) << 32))
    throw UsageError("vocab " + std::to_string(vocab) + " is out of range [1, 2^32]");
  if (vocab <= 256) return 8;
  if (vocab <= 65536) return 16;
  return 32;
}

void hash_document_key(Sha256& h, const std::string& id, int64_t version, const Sha256Digest& th) {
  h.update(id.data(), id.size());
  h.update("\0", 1);
  std::string v = std::to_string(version);
  h.update(v.data(), v.size());
  h.update("\0", 1);
  h.update(th.data(), th.size());
}

namespace {
void hash_dataset_prefix(Sha256& h, int64_t vocab, int64_t separator) {
  h.update("shardtrain-dataset-v1\n");
  h.update("vocab=" + std::to_string(vocab) + "\n");
  h.update("separator=" + std::to_string(separator) + "\n");
}
}  // namespace

std::string compute_dataset_snapshot_id(int64_t vocab, int64_t separator,
                                        const std::vector<DocumentRecord>& documents) {
  Sha256 h;
  hash_dataset_prefix(h, vocab, separator);
  for (const auto& d : documents) hash_document_key(h, d.id, d.version, d.token_sha256);
  return to_hex(h.digest());
}

// ================================ HDF5 helpers (writer) =======================================
namespace {
using namespace dataset_h5;

// An extendible 1-D or 2-D (rows, width) chunked dataset appended to in row blocks.
class Column {
 public:
  Column() = default;
  Column(hid_t loc, const char* name, hid_t file_type, hid_t mem_type, hsize_t width,
         hsize_t chunk_rows, bool compress)
      : mem_type_(H5Tcopy(mem_type), H5Tclose), width_(width), name_(name) {
    int rank = width > 1 ? 2 : 1;
    hsize_t dims[2] = {0, width}, maxdims[2] = {H5S_UNLIMITED, width}, chunk[2] = {chunk_rows, width};
    Hid space(H5Screate_simple(rank, dims, maxdims), H5Sclose);
    Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), rank, chunk);
    if (compress && H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
      H5Pset_shuffle(dcpl.get());
      H5Pset_deflate(dcpl.get(), kDeflateLevel);
    }
    dset_ = checked(H5Dcreate2(loc, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                    H5Dclose, std::string("cannot create dataset ") + name);
  }
  void append(const void* data, hsize_t rows) {
    if (rows == 0) return;
    hsize_t newdims[2] = {rows_ + rows, width_};
    check(H5Dset_extent(dset_.get(), newdims), "cannot extend " + name_);
    Hid fspace(H5Dget_space(dset_.get()), H5Sclose);
    int rank = width_ > 1 ? 2 : 1;
    hsize_t start[2] = {rows_, 0}, count[2] = {rows, width_};
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    Hid mspace(H5Screate_simple(rank, count, nullptr), H5Sclose);
    check(H5Dwrite(dset_.get(), mem_type_.get(), mspace.get(), fspace.get(), H5P_DEFAULT, data),
          "cannot write " + name_ + " (disk full?)");
    rows_ += rows;
  }
  void close() { dset_.reset(); }

 private:
  Hid mem_type_;  // owned copy of the memory type
  Hid dset_;
  hsize_t width_ = 1;
  hsize_t rows_ = 0;
  std::string name_;
};


void write_string_dataset(hid_t loc, const char* name, const std::vector<std::string>& values) {
  Hid mtype = vlen_string_type();
  hsize_t n = values.size();
  Hid space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Hid d = checked(H5Dcreate2(loc, name, mtype.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  H5Dclose, std::string("cannot create ") + name);
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  if (n > 0)
    check(H5Dwrite(d.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()),
          std::string("cannot write ") + name);
}
template <class T>
void write_plain_dataset(hid_t loc, const char* name, hid_t ftype, hid_t mtype, const std::vector<T>& v) {
  hsize_t n = v.size();
  Hid space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Hid d = checked(H5Dcreate2(loc, name, ftype, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  H5Dclose, std::string("cannot create ") + name);
  if (n > 0)
    check(H5Dwrite(d.get(), mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
          std::string("cannot write ") + name);
}

}  // namespace

// ================================ writer ======================================================
struct DatasetWriter::Impl {
  std::string path, tmp_path;
  DatasetHeader header;
  Hid file, docs_group;
  Column tokens, id_col, version_col, offset_col, length_col, event_col, avail_col, owner_col, hash_col;
  std::vector<uint8_t> token_buf;  // stored width, little-endian (host order on x86/ARM LE)
  std::size_t token_buf_limit = 0;
  // Document table rows, flushed every kTableChunkRows.
  std::vector<std::string> ids;
  std::vector<int64_t> versions, events, avails;
  std::vector<uint64_t> offsets, lengths;
  std::vector<uint32_t> owners_idx;
  std::vector<uint8_t> hashes;
  std::unordered_map<std::string, uint32_t> owner_index;
  std::vector<std::string> owner_names;
  std::vector<SourceRecord> sources;
  std::vector<std::pair<std::string, double>> extra_doubles;
  std::vector<std::pair<std::string, std::string>> extra_strings;
  Sha256 snapshot;
  bool finished = false;

  template <class T>
  void add(const std::string& id, int64_t version, int64_t event, int64_t avail,
           const std::string& owner, std::span<const T> toks);
  void flush_tokens() {
    tokens.append(token_buf.data(), token_buf.size() / (header.token_bits / 8));
    token_buf.clear();
  }
  void flush_table() {
    std::vector<const char*> ptrs;
    ptrs.reserve(ids.size());
    for (const auto& s : ids) ptrs.push_back(s.c_str());
    hsize_t n = ids.size();
    id_col.append(ptrs.data(), n);
    version_col.append(versions.data(), n);
    offset_col.append(offsets.data(), n);
    length_col.append(lengths.data(), n);
    event_col.append(events.data(), n);
    avail_col.append(avails.data(), n);
    owner_col.append(owners_idx.data(), n);
    hash_col.append(hashes.data(), n);
    ids.clear(); versions.clear(); offsets.clear(); lengths.clear(); events.clear(); avails.clear();
    owners_idx.clear(); hashes.clear();
  }
};

template <class T>
void DatasetWriter::Impl::add(const std::string& id, int64_t version, int64_t event,
                       int64_t avail, const std::string& owner, std::span<const T> toks) {
  Impl& m = *this;
  const int width = m.header.token_bits / 8;
  const uint64_t offset = m.header.num_tokens;
  Sha256 th;
  // Append tokens in the stored width, hashing the stored bytes as they go.
  std::size_t i = 0;
  while (i < toks.size()) {
    std::size_t room = (m.token_buf_limit - m.token_buf.size()) / width;
    if (room == 0) { m.flush_tokens(); continue; }
    std::size_t take = std::min(room, toks.size() - i);
    std::size_t start = m.token_buf.size();
    m.token_buf.resize(start + take * width);
    uint8_t* dst = m.token_buf.data() + start;
    if (width == int(sizeof(T))) {
      std::memcpy(dst, toks.data() + i, take * width);
    } else {
      for (std::size_t k = 0; k < take; ++k) {
        uint32_t v = uint32_t(toks[i + k]);
        for (int b = 0; b < width; ++b) dst[k * width + b] = uint8_t(v >> (8 * b));
      }
    }
    th.update(dst, take * width);
    i += take;
  }
  Sha256Digest digest = th.digest();
  auto [it, inserted] = m.owner_index.emplace(owner, uint32_t(m.owner_names.size()));
  if (inserted) m.owner_names.push_back(owner);
  m.ids.push_back(id);
  m.versions.push_back(version);
  m.offsets.push_back(offset);
  m.lengths.push_back(toks.size());
  m.events.push_back(event);
  m.avails.push_back(avail);
  m.owners_idx.push_back(it->second);
  m.hashes.insert(m.hashes.end(), digest.begin(), digest.end());
  hash_document_key(m.snapshot, id, version, digest);
  m.header.num_tokens += toks.size();
  m.header.num_documents += 1;
  if (m.ids.size() >= kTableChunkRows) m.flush_table();
}

DatasetWriter::DatasetWriter(const std::string& path, int64_t vocab, const std::string& tokenizer,
                             int64_t separator_token)
    : impl_(std::make_unique<Impl>()) {
  quiet_hdf5();
  auto& m = *impl_;
  m.path = path;
  m.tmp_path = path + ".tmp." + std::to_string(::getpid());
  m.header.vocab = vocab;
  m.header.tokenizer = tokenizer;
  m.header.separator_token = separator_token;
  m.header.token_bits = token_bits_for_vocab(vocab);
  m.header.created_by = code_version();
  if (separator_token < 0 || separator_token >= vocab)
    throw UsageError("separator token " + std::to_string(separator_token) + " is outside the vocab [0, " +
                     std::to_string(vocab) + ")");
  hash_dataset_prefix(m.snapshot, vocab, separator_token);
  m.file = Hid(H5Fcreate(m.tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!m.file.ok()) throw IoError("cannot create dataset file " + m.tmp_path);
  hid_t f = m.file.get();
  m.tokens = Column(f, "tokens", token_file_type(m.header.token_bits), token_mem_type(m.header.token_bits),
                    1, kTokenChunkElements, true);
  m.docs_group = checked(H5Gcreate2(f, "documents", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                         "cannot create group /documents");
  hid_t g = m.docs_group.get();
  Hid vstr = vlen_string_type();
  m.id_col = Column(g, "id", vstr.get(), vstr.get(), 1, kTableChunkRows, false);
  m.version_col = Column(g, "version", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, kTableChunkRows, true);
  m.offset_col = Column(g, "offset", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, kTableChunkRows, true);
  m.length_col = Column(g, "length", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, kTableChunkRows, true);
  m.event_col = Column(g, "event_time", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, kTableChunkRows, true);
  m.avail_col = Column(g, "available_time", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, kTableChunkRows, true);
  m.owner_col = Column(g, "owner", H5T_STD_U32LE, H5T_NATIVE_UINT32, 1, kTableChunkRows, true);
  m.hash_col = Column(g, "token_sha256", H5T_STD_U8LE, H5T_NATIVE_UINT8, 32, kTableChunkRows, false);
  m.token_buf_limit = std::size_t(2) << 20;
  m.token_buf.reserve(m.token_buf_limit + 4096);
}

DatasetWriter::~DatasetWriter() {
  if (impl_ && !impl_->finished) {
    quiet_hdf5();
    impl_->tokens.close();
    impl_->docs_group.reset();
    impl_->file.reset();
    std::error_code ec;
    std::filesystem::remove(impl_->tmp_path, ec);
  }
}


void DatasetWriter::add_document(const std::string& id, int64_t version, int64_t event_time,
                                 int64_t available_time, const std::string& owner,
                                 std::span<const uint8_t> byte_tokens) {
  quiet_hdf5();
  impl_->add(id, version, event_time, available_time, owner, byte_tokens);
}
void DatasetWriter::add_document(const std::string& id, int64_t version, int64_t event_time,
                                 int64_t available_time, const std::string& owner,
                                 std::span<const uint32_t> tokens) {
  quiet_hdf5();
  impl_->add(id, version, event_time, available_time, owner, tokens);
}
void DatasetWriter::add_source(const SourceRecord& source) { impl_->sources.push_back(source); }
void DatasetWriter::set_double_attribute(const std::string& name, double value) {
  impl_->extra_doubles.emplace_back(name, value);
}
void DatasetWriter::set_string_attribute(const std::string& name, const std::string& value) {
  impl_->extra_strings.emplace_back(name, value);
}
uint64_t DatasetWriter::num_documents() const { return impl_->header.num_documents; }
uint64_t DatasetWriter::num_tokens() const { return impl_->header.num_tokens; }
std::size_t DatasetWriter::num_owners() const { return impl_->owner_names.size(); }

DatasetHeader DatasetWriter::finish() {
  quiet_hdf5();
  auto& m = *impl_;
  m.flush_tokens();
  m.flush_table();
  m.header.snapshot_id = to_hex(m.snapshot.digest());
  hid_t f = m.file.get();
  {
    Hid og = checked(H5Gcreate2(f, "owners", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                     "cannot create /owners");
    write_string_dataset(og.get(), "name", m.owner_names);
    Hid sg = checked(H5Gcreate2(f, "sources", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                     "cannot create /sources");
    std::vector<std::string> paths, hashes;
    std::vector<uint64_t> bytes;
    for (const auto& s : m.sources) { paths.push_back(s.path); hashes.push_back(s.sha256_hex); bytes.push_back(s.bytes); }
    write_string_dataset(sg.get(), "path", paths);
    write_string_dataset(sg.get(), "sha256", hashes);
    write_plain_dataset(sg.get(), "bytes", H5T_STD_U64LE, H5T_NATIVE_UINT64, bytes);
  }
  write_attr_str(f, "format", kDatasetFormatName);
  write_attr<int64_t>(f, "format_version", kDatasetFormatVersion);
  write_attr<int64_t>(f, "vocab", m.header.vocab);
  write_attr_str(f, "tokenizer", m.header.tokenizer);
  write_attr<int64_t>(f, "separator_token", m.header.separator_token);
  write_attr<int64_t>(f, "token_bits", m.header.token_bits);
  write_attr<int64_t>(f, "num_documents", int64_t(m.header.num_documents));
  write_attr<int64_t>(f, "num_tokens", int64_t(m.header.num_tokens));
  write_attr_str(f, "snapshot_id", m.header.snapshot_id);
  write_attr_str(f, "created_by", m.header.created_by);
  for (const auto& [name, value] : m.extra_doubles) write_attr<double>(f, name.c_str(), value);
  for (const auto& [name, value] : m.extra_strings) write_attr_str(f, name.c_str(), value);
  m.tokens.close();
  m.id_col.close(); m.version_col.close(); m.offset_col.close(); m.length_col.close();
  m.event_col.close(); m.avail_col.close(); m.owner_col.close(); m.hash_col.close();
  m.docs_group.reset();
  check(H5Fflush(f, H5F_SCOPE_GLOBAL), "cannot flush " + m.tmp_path);
  m.file.reset();
  commit_file_atomically(m.tmp_path, m.path);
  m.finished = true;
  return m.header;
}

}  // namespace shardtrain::data
