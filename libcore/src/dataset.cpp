// Dataset file writer and reader (HDF5 C API), SHA-256, RFC 3339 time parsing.
#include "shardtrain/dataset.hpp"

#include <hdf5.h>
#include <unistd.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "h5_detail.hpp"
#include "shardtrain/error.hpp"
#include "shardtrain/log.hpp"

namespace shardtrain::data {

// ================================ SHA-256 =====================================================
namespace {
constexpr uint32_t kSha256K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

#if defined(__x86_64__) && defined(__GNUC__)
// SHA-256 blocks with the x86 SHA extensions (4 rounds per sha256rnds2 pair): ~10x the portable
// code. Used only when CPUID reports SHA (checked once); the result is bit-identical.
__attribute__((target("sha,sse4.1"))) void sha256_blocks_shani(uint32_t state[8], const uint8_t* data,
                                                                std::size_t blocks) {
  const __m128i kMask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0]));
  __m128i state1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4]));
  tmp = _mm_shuffle_epi32(tmp, 0xB1);                // CDAB
  state1 = _mm_shuffle_epi32(state1, 0x1B);          // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // CDGH
  for (; blocks > 0; --blocks, data += 64) {
    const __m128i abef = state0, cdgh = state1;
    __m128i w[4];
    for (int g = 0; g < 16; ++g) {
      if (g < 4) {
        w[g] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * g)), kMask);
      } else {  // words 4g..4g+3 from the previous four groups
        __m128i x = _mm_add_epi32(_mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]),
                                  _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4));
        w[g & 3] = _mm_sha256msg2_epu32(x, w[(g + 3) & 3]);
      }
      __m128i msg = _mm_add_epi32(w[g & 3], _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSha256K + 4 * g)));
      state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
      msg = _mm_shuffle_epi32(msg, 0x0E);
      state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);     // ABEF
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), state1);
}
bool cpu_has_sha() {
  static const bool has = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(b & (1u << 29))) return false;  // SHA
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c & (1u << 19)) && (c & (1u << 9));  // SSE4.1, SSSE3
  }();
  return has;
}
#endif
}  // namespace

void Sha256::compress_blocks(const uint8_t* p, std::size_t blocks) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu_has_sha()) {
    sha256_blocks_shani(h_.data(), p, blocks);
    return;
  }
#endif
  for (; blocks > 0; --blocks, p += 64) compress(p);
}

Sha256::Sha256()
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
         0x5be0cd19},
      buffer_{} {}

void Sha256::compress(const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t(p[4 * i]) << 24) | (uint32_t(p[4 * i + 1]) << 16) |
           (uint32_t(p[4 * i + 2]) << 8) | uint32_t(p[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = h + S1 + ch + kSha256K[i] + w[i];
    uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = S0 + maj;
    h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  h_[0] += a; h_[1] += b; h_[2] += c; h_[3] += d; h_[4] += e; h_[5] += f; h_[6] += g; h_[7] += h;
}

void Sha256::update(const void* data, std::size_t bytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_bytes_ += bytes;
  if (buffered_ > 0) {
    std::size_t take = std::min(bytes, 64 - buffered_);
    std::memcpy(buffer_.data() + buffered_, p, take);
    buffered_ += take; p += take; bytes -= take;
    if (buffered_ < 64) return;
    compress_blocks(buffer_.data(), 1);
    buffered_ = 0;
  }
  if (bytes >= 64) {
    compress_blocks(p, bytes / 64);
    p += bytes / 64 * 64;
    bytes %= 64;
  }
  if (bytes > 0) { std::memcpy(buffer_.data(), p, bytes); buffered_ = bytes; }
}

Sha256Digest Sha256::digest() {
  uint64_t bits = total_bytes_ * 8;
  uint8_t pad = 0x80;
  update(&pad, 1);
  uint8_t zero = 0;
  while (buffered_ != 56) update(&zero, 1);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(bits >> (56 - 8 * i));
  update(len, 8);
  Sha256Digest out;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = uint8_t(h_[i] >> (24 - 8 * j));
  return out;
}

std::string to_hex(const Sha256Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s(64, '0');
  for (int i = 0; i < 32; ++i) { s[2 * i] = digits[d[i] >> 4]; s[2 * i + 1] = digits[d[i] & 15]; }
  return s;
}

Sha256Digest sha256(const void* data, std::size_t bytes) {
  Sha256 h;
  h.update(data, bytes);
  return h.digest();
}

// ================================ time ========================================================
namespace {
// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + int64_t(doe) - 719468;
}
void civil_from_days(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = unsigned(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = int64_t(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp + (mp < 10 ? 3 : -9);
  y += m <= 2;
}
bool digits_at(const std::string& s, std::size_t pos, std::size_t n, int& value) {
  if (pos + n > s.size()) return false;
  value = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    value = value * 10 + (s[i] - '0');
  }
  return true;
}
}  // namespace

std::optional<int64_t> try_parse_rfc3339(const std::string& s, std::string* why) {
  auto fail = [&](const char* reason) -> std::optional<int64_t> {
    if (why) *why = reason;
    return std::nullopt;
  };
  int year, month, day, hour, minute, second;
  if (!digits_at(s, 0, 4, year) || s.size() < 5 || s[4] != '-' || !digits_at(s, 5, 2, month) ||
      s.size() < 8 || s[7] != '-' || !digits_at(s, 8, 2, day))
    return fail("expected YYYY-MM-DD");
  if (s.size() < 11 || (s[10] != 'T' && s[10] != 't')) return fail("expected 'T' after the date");
  if (!digits_at(s, 11, 2, hour) || s.size() < 14 || s[13] != ':' || !digits_at(s, 14, 2, minute) ||
      s.size() < 17 || s[16] != ':' || !digits_at(s, 17, 2, second))
    return fail("expected HH:MM:SS");
  if (month < 1 || month > 12) return fail("month out of range");
  static const int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  int mdays = kDays[month - 1] + (month == 2 && leap ? 1 : 0);
  if (day < 1 || day > mdays) return fail("day out of range for the month");
  if (hour > 23) return fail("hour out of range");
  if (minute > 59) return fail("minute out of range");
  if (second > 60) return fail("second out of range");
  std::size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
    if (pos == start) return fail("empty fraction after '.'");
  }
  if (pos >= s.size()) return fail("missing time zone offset (Z or +HH:MM)");
  int64_t offset_s = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    int oh, om;
    if (!digits_at(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !digits_at(s, pos + 4, 2, om))
      return fail("expected offset +HH:MM or -HH:MM");
    if (oh > 23 || om > 59) return fail("offset out of range");
    offset_s = (int64_t(oh) * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return fail("expected Z or +HH:MM after the time");
  }
  if (pos != s.size()) return fail("trailing characters");
  int64_t days = days_from_civil(year, unsigned(month), unsigned(day));
  return days * 86400 + int64_t(hour) * 3600 + minute * 60 + second - offset_s;
}

int64_t parse_rfc3339(const std::string& text, const std::string& what) {
  std::string why;
  auto t = try_parse_rfc3339(text, &why);
  if (!t) throw UsageError(what + ": '" + text + "' is not an RFC 3339 date-time (" + why + ")");
  return *t;
}

std::string format_rfc3339(int64_t t) {
  int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
  int64_t rem = t - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02dZ", (long long)y, m, d,
                int(rem / 3600), int(rem / 60 % 60), int(rem % 60));
  return buf;
}

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

// ================================ HDF5 helpers ================================================
namespace {
using Hid = h5detail::Handle;
using h5detail::quiet_hdf5;

void check(herr_t status, const std::string& what) {
  if (status < 0) throw IoError(what);
}
Hid checked(hid_t id, herr_t (*closer)(hid_t), const std::string& what) {
  if (id < 0) throw IoError(what);
  return Hid(id, closer);
}

Hid vlen_string_type() { return h5detail::vlen_string_type(H5T_CSET_UTF8); }

// Root attributes: written once each (a repeated name fails creation), numbers little-endian,
// strings fixed-length UTF-8, NUL-padded; read back as nullopt when missing or of another type.
void check_attr_written(h5detail::WriteResult result, const char* name) {
  if (result == h5detail::WriteResult::kCreateFailed) throw IoError(std::string("cannot create attribute ") + name);
  if (result == h5detail::WriteResult::kWriteFailed) throw IoError(std::string("cannot write attribute ") + name);
}
template <class T>
void write_attr(hid_t obj, const char* name, T v) {
  check_attr_written(h5detail::write_scalar_attr(obj, ".", name, h5detail::Type<T>::little_endian(), v), name);
}
void write_attr_str(hid_t obj, const char* name, const std::string& v) {
  check_attr_written(h5detail::write_string_attr(obj, ".", name, v, H5T_CSET_UTF8, H5T_STR_NULLPAD), name);
}

template <class T>
std::optional<T> read_attr(hid_t obj, const char* name) {
  return h5detail::read_scalar_attr<T>(obj, ".", name);
}
std::optional<std::string> read_attr_str(hid_t obj, const char* name) {
  constexpr h5detail::StringRead kStringRead{H5T_CSET_UTF8, true, h5detail::StringRead::kFromFirstNul};
  Hid a = h5detail::open_attr(obj, ".", name);
  if (!a.ok() || !h5detail::is_string(a.get())) return std::nullopt;
  return h5detail::read_string(a.get(), kStringRead);
}

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

template <class T>
std::vector<T> read_column(hid_t file, const char* name, hid_t mem_type, std::size_t expect_rows,
                           std::size_t width = 1) {
  Hid d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!d.ok()) throw UsageError(std::string("dataset file lacks ") + name);
  Hid space(H5Dget_space(d.get()), H5Sclose);
  hsize_t dims[2] = {0, 0};
  int rank = H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  if (rank < 1 || dims[0] != expect_rows || (width > 1 && (rank != 2 || dims[1] != width)))
    throw UsageError(std::string(name) + " has " + std::to_string(dims[0]) + " rows, expected " +
                     std::to_string(expect_rows));
  std::vector<T> out(expect_rows * width);
  if (expect_rows > 0)
    check(H5Dread(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
          std::string("cannot read ") + name);
  return out;
}

std::vector<std::string> read_string_column(hid_t file, const char* name, std::size_t expect_rows) {
  Hid d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!d.ok()) throw UsageError(std::string("dataset file lacks ") + name);
  Hid space(H5Dget_space(d.get()), H5Sclose);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  if (n != expect_rows)
    throw UsageError(std::string(name) + " has " + std::to_string(n) + " rows, expected " +
                     std::to_string(expect_rows));
  std::vector<std::string> out;
  out.reserve(n);
  if (n == 0) return out;
  Hid mtype = vlen_string_type();
  std::vector<char*> ptrs(n, nullptr);
  check(H5Dread(d.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()),
        std::string("cannot read ") + name);
  for (char* p : ptrs) out.emplace_back(p ? p : "");
  H5Dvlen_reclaim(mtype.get(), space.get(), H5P_DEFAULT, ptrs.data());
  return out;
}

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

hid_t token_file_type(int bits) {
  return bits == 8 ? H5T_STD_U8LE : bits == 16 ? H5T_STD_U16LE : H5T_STD_U32LE;
}
hid_t token_mem_type(int bits) {
  return bits == 8 ? H5T_NATIVE_UINT8 : bits == 16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32;
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
  std::error_code ec;
  std::filesystem::rename(m.tmp_path, m.path, ec);
  if (ec) throw IoError("cannot rename " + m.tmp_path + " to " + m.path + ": " + ec.message());
  m.finished = true;
  return m.header;
}

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
  hid_t f = m.file.get();
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
  m.header.format_version = int(*version);
  m.header.vocab = need_i64("vocab");
  m.header.tokenizer = need_str("tokenizer");
  m.header.separator_token = need_i64("separator_token");
  m.header.token_bits = int(need_i64("token_bits"));
  m.header.num_documents = uint64_t(need_i64("num_documents"));
  m.header.num_tokens = uint64_t(need_i64("num_tokens"));
  m.header.snapshot_id = need_str("snapshot_id");
  m.header.created_by = read_attr_str(f, "created_by").value_or("");
  const std::size_t D = m.header.num_documents;
  auto ids = read_string_column(f, "documents/id", D);
  auto versions = read_column<int64_t>(f, "documents/version", H5T_NATIVE_INT64, D);
  auto offsets = read_column<uint64_t>(f, "documents/offset", H5T_NATIVE_UINT64, D);
  auto lengths = read_column<uint64_t>(f, "documents/length", H5T_NATIVE_UINT64, D);
  auto events = read_column<int64_t>(f, "documents/event_time", H5T_NATIVE_INT64, D);
  auto avails = read_column<int64_t>(f, "documents/available_time", H5T_NATIVE_INT64, D);
  auto owners = read_column<uint32_t>(f, "documents/owner", H5T_NATIVE_UINT32, D);
  auto hashes = read_column<uint8_t>(f, "documents/token_sha256", H5T_NATIVE_UINT8, D, 32);
  m.owners = read_string_column(f, "owners/name", [&] {
    Hid d(H5Dopen2(f, "owners/name", H5P_DEFAULT), H5Dclose);
    if (!d.ok()) throw UsageError(path + ": missing /owners/name");
    Hid s(H5Dget_space(d.get()), H5Sclose);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(s.get(), &n, nullptr);
    return std::size_t(n);
  }());
  m.documents.resize(D);
  for (std::size_t i = 0; i < D; ++i) {
    auto& d = m.documents[i];
    d.id = std::move(ids[i]);
    d.version = versions[i];
    d.offset = offsets[i];
    d.length = lengths[i];
    d.event_time = events[i];
    d.available_time = avails[i];
    d.owner = owners[i];
    std::memcpy(d.token_sha256.data(), hashes.data() + 32 * i, 32);
    if (d.owner >= m.owners.size() || d.offset + d.length > m.header.num_tokens)
      throw UsageError(path + ": document " + std::to_string(i) + " (" + d.id +
                       ") has an owner or token range outside the file's tables");
  }
  if (H5Lexists(f, "sources", H5P_DEFAULT) > 0) {
    Hid d(H5Dopen2(f, "sources/path", H5P_DEFAULT), H5Dclose);
    hsize_t n = 0;
    if (d.ok()) {
      Hid s(H5Dget_space(d.get()), H5Sclose);
      H5Sget_simple_extent_dims(s.get(), &n, nullptr);
    }
    auto paths = read_string_column(f, "sources/path", n);
    auto shas = read_string_column(f, "sources/sha256", n);
    auto bytes = read_column<uint64_t>(f, "sources/bytes", H5T_NATIVE_UINT64, n);
    for (std::size_t i = 0; i < n; ++i) m.sources.push_back({paths[i], shas[i], bytes[i]});
  }
  m.tokens = Hid(H5Dopen2(f, "tokens", H5P_DEFAULT), H5Dclose);
  if (!m.tokens.ok()) throw UsageError(path + ": missing /tokens");
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
