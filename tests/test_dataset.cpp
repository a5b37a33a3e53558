// Dataset file module: SHA-256 vectors, strict RFC 3339, token width, writer/reader round trip,
// snapshot id, atomic write, reader errors.
#include <catch2/catch.hpp>

#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "shardtrain/data/dataset.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/h5file.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::data;

TEST_CASE("sha256 matches the FIPS 180-4 test vectors, one-shot and incremental", "[dataset]") {
  CHECK(to_hex(sha256("", 0)) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(to_hex(sha256("abc", 3)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(to_hex(sha256(two_blocks.data(), two_blocks.size())) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  const std::string expect = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  CHECK(to_hex(sha256(million.data(), million.size())) == expect);
  Sha256 h;  // uneven pieces across block boundaries
  std::size_t pos = 0, step = 1;
  while (pos < million.size()) {
    std::size_t take = std::min(step, million.size() - pos);
    h.update(million.data() + pos, take);
    pos += take;
    step = step * 7 % 1000 + 1;
  }
  CHECK(to_hex(h.digest()) == expect);
}

TEST_CASE("RFC 3339 parsing is strict and exact", "[dataset]") {
  CHECK(parse_rfc3339("1970-01-01T00:00:00Z") == 0);
  CHECK(parse_rfc3339("2024-01-01T00:00:00Z") == 1704067200);
  CHECK(parse_rfc3339("2024-01-01t00:00:00z") == 1704067200);
  CHECK(parse_rfc3339("2024-01-01T02:00:00+02:00") == 1704067200);
  CHECK(parse_rfc3339("2023-12-31T19:30:00-04:30") == 1704067200);
  CHECK(parse_rfc3339("2024-01-01T00:00:00.999999Z") == 1704067200);  // fraction truncated
  CHECK(parse_rfc3339("2024-02-29T12:00:00Z") == 1709208000);         // leap day
  CHECK(parse_rfc3339("2000-02-29T00:00:00Z") == 951782400);          // 400-year leap
  CHECK(parse_rfc3339("1969-12-31T23:59:59Z") == -1);
  CHECK(parse_rfc3339("2016-12-31T23:59:60Z") == 1483228800);         // leap second
  for (const char* bad : {"", "2024-01-01", "2024-01-01T00:00:00", "2024-01-01 00:00:00Z",
                          "2024-13-01T00:00:00Z", "2024-00-10T00:00:00Z", "2023-02-29T00:00:00Z",
                          "1900-02-29T00:00:00Z", "2024-04-31T00:00:00Z", "2024-01-01T24:00:00Z",
                          "2024-01-01T00:60:00Z", "2024-01-01T00:00:61Z", "2024-01-01T00:00:00.Z",
                          "2024-01-01T00:00:00+0200", "2024-01-01T00:00:00+24:00", "2024-1-01T00:00:00Z",
                          "2024-01-01T00:00:00Zjunk", " 2024-01-01T00:00:00Z", "2024-01-01T00:00:00UTC"}) {
    INFO(bad);
    CHECK_FALSE(try_parse_rfc3339(bad).has_value());
  }
  CHECK_THROWS_AS(parse_rfc3339("yesterday", "--cutoff"), UsageError);
  CHECK_THROWS_WITH(parse_rfc3339("2024-02-30T00:00:00Z", "--cutoff"),
                    Catch::Contains("--cutoff") && Catch::Contains("day out of range"));
  for (int64_t t : {int64_t(0), int64_t(-1), int64_t(951782400), int64_t(4102444799), int64_t(-2208988800)})
    CHECK(parse_rfc3339(format_rfc3339(t)) == t);
  CHECK(format_rfc3339(1704067200) == "2024-01-01T00:00:00Z");
}

TEST_CASE("token width is the smallest unsigned type for the vocab", "[dataset]") {
  CHECK(token_bits_for_vocab(2) == 8);
  CHECK(token_bits_for_vocab(256) == 8);
  CHECK(token_bits_for_vocab(257) == 16);
  CHECK(token_bits_for_vocab(65536) == 16);
  CHECK(token_bits_for_vocab(65537) == 32);
  CHECK(token_bits_for_vocab(int64_t(1) << 32) == 32);
  CHECK_THROWS_AS(token_bits_for_vocab(0), UsageError);
  CHECK_THROWS_AS(token_bits_for_vocab((int64_t(1) << 32) + 1), UsageError);
}

namespace {
struct Doc {
  std::string id;
  int64_t version;
  int64_t event, avail;
  std::string owner;
  std::vector<uint32_t> tokens;
};
std::vector<Doc> random_docs(std::size_t n, int64_t vocab, int64_t separator, unsigned seed, std::size_t max_len) {
  std::mt19937_64 gen(seed);
  std::vector<Doc> docs;
  for (std::size_t i = 0; i < n; ++i) {
    Doc d{"doc-" + std::to_string(i), int64_t(gen() % 5), 1700000000 + int64_t(gen() % 1000000), 0,
          "owner-" + std::to_string(gen() % 7), {}};
    d.avail = d.event + int64_t(gen() % 5000);
    std::size_t len = i == 3 ? 0 : gen() % (max_len + 1);  // document 3 is empty
    for (std::size_t k = 0; k < len; ++k) {
      uint32_t t;
      do t = uint32_t(gen() % uint64_t(vocab)); while (t == uint32_t(separator));
      d.tokens.push_back(t);
    }
    docs.push_back(std::move(d));
  }
  return docs;
}
std::string write_docs(const std::string& path, const std::vector<Doc>& docs, int64_t vocab, int64_t sep) {
  DatasetWriter w(path, vocab, "test-tok", sep);
  for (const auto& d : docs) w.add_document(d.id, d.version, d.event, d.avail, d.owner, std::span<const uint32_t>(d.tokens));
  w.add_source({"in.jsonl", std::string(64, 'a'), 123});
  w.set_double_attribute("entropy_nats_per_token", 1.25);
  return w.finish().snapshot_id;
}
}  // namespace

TEST_CASE("dataset writer and reader round-trip tokens and metadata at every token width", "[dataset]") {
  const std::string dir = test::temp_dir("dataset");
  struct Case { int64_t vocab; int bits; std::size_t docs, max_len; };
  for (Case c : {Case{256, 8, 20000, 40}, Case{300, 16, 50, 70000}, Case{70000, 32, 30, 1000}}) {
    INFO("vocab " << c.vocab);
    const int64_t sep = c.vocab - 1;
    auto docs = random_docs(c.docs, c.vocab, sep, unsigned(c.vocab), c.max_len);
    const std::string path = dir + "/v" + std::to_string(c.vocab) + ".h5";
    const std::string snapshot = write_docs(path, docs, c.vocab, sep);
    auto r = DatasetReader::open(path);
    const auto& h = r.header();
    CHECK(h.format_version == kDatasetFormatVersion);
    CHECK(h.vocab == c.vocab);
    CHECK(h.tokenizer == "test-tok");
    CHECK(h.separator_token == sep);
    CHECK(h.token_bits == c.bits);
    CHECK(h.snapshot_id == snapshot);
    CHECK(h.num_documents == docs.size());
    REQUIRE(r.documents().size() == docs.size());
    uint64_t offset = 0;
    for (std::size_t i = 0; i < docs.size(); ++i) {
      const auto& rec = r.documents()[i];
      const auto& d = docs[i];
      REQUIRE(rec.id == d.id);
      REQUIRE(rec.version == d.version);
      REQUIRE(rec.event_time == d.event);
      REQUIRE(rec.available_time == d.avail);
      REQUIRE(r.owners()[rec.owner] == d.owner);
      REQUIRE(rec.offset == offset);
      REQUIRE(rec.length == d.tokens.size());
      offset += d.tokens.size();
      if (i < 200 || i % 997 == 0) REQUIRE(r.read_document(i) == d.tokens);
    }
    CHECK(h.num_tokens == offset);
    CHECK(compute_dataset_snapshot_id(c.vocab, sep, r.documents()) == snapshot);
    REQUIRE(r.sources().size() == 1);
    CHECK(r.sources()[0].bytes == 123);
    CHECK(r.double_attribute("entropy_nats_per_token").value() == 1.25);
    CHECK_FALSE(r.double_attribute("no_such").has_value());
    std::vector<uint32_t> out(3);
    CHECK_THROWS_AS(r.read_tokens(h.num_tokens - 1, 3, out.data()), UsageError);
  }
}

TEST_CASE("snapshot id depends on ids, versions, tokens and order", "[dataset]") {
  const std::string dir = test::temp_dir("snapshot");
  auto docs = random_docs(10, 256, 0, 7, 50);
  const std::string base = write_docs(dir + "/a.h5", docs, 256, 0);
  CHECK(write_docs(dir + "/a2.h5", docs, 256, 0) == base);  // deterministic
  auto changed_token = docs;
  changed_token[5].tokens.at(0) = changed_token[5].tokens.at(0) % 255 + 1;
  CHECK(write_docs(dir + "/b.h5", changed_token, 256, 0) != base);
  auto changed_version = docs;
  changed_version[2].version += 1;
  CHECK(write_docs(dir + "/c.h5", changed_version, 256, 0) != base);
  auto swapped = docs;
  std::swap(swapped[0], swapped[1]);
  CHECK(write_docs(dir + "/d.h5", swapped, 256, 0) != base);
  auto changed_time = docs;  // metadata other than (id, version, tokens) is not part of the id
  changed_time[4].avail += 10;
  changed_time[4].owner = "someone else";
  CHECK(write_docs(dir + "/e.h5", changed_time, 256, 0) == base);
}

TEST_CASE("an unfinished writer leaves no file and readers reject what is not a dataset", "[dataset]") {
  const std::string dir = test::temp_dir("dataset-errors");
  {
    DatasetWriter w(dir + "/never.h5", 256, "bytes", 0);
    std::vector<uint8_t> t{1, 2, 3};
    w.add_document("x", 1, 0, 0, "o", std::span<const uint8_t>(t));
  }
  CHECK(std::filesystem::is_empty(dir));
  CHECK_THROWS_AS(DatasetReader::open(dir + "/missing.h5"), IoError);
  { std::ofstream(dir + "/text.h5") << "not hdf5"; }
  CHECK_THROWS_AS(DatasetReader::open(dir + "/text.h5"), UsageError);
  { H5File f(dir + "/plain.h5", H5File::Mode::kCreate); }
  CHECK_THROWS_WITH(DatasetReader::open(dir + "/plain.h5"), Catch::Contains("not a shardtrain dataset"));
  CHECK_THROWS_AS(DatasetWriter(dir + "/bad.h5", 256, "bytes", 256), UsageError);
}

namespace {
// Makes /name of an existing dataset file `rows` long (an extendible column: the new rows are never
// written, so HDF5 reads them as zeros without storing them) and, when `attribute` is given, sets
// that int64 root attribute to `rows` too, as a damaged or hostile writer's file would say.
void declare_rows(const std::string& path, const std::vector<std::string>& names, hsize_t rows,
                  const char* attribute) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  for (const std::string& name : names) {
    hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    REQUIRE(d >= 0);
    hid_t space = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    const int rank = H5Sget_simple_extent_dims(space, dims, nullptr);
    H5Sclose(space);
    dims[0] = rows;
    REQUIRE(rank >= 1);
    REQUIRE(H5Dset_extent(d, dims) >= 0);
    H5Dclose(d);
  }
  if (attribute) {
    hid_t a = H5Aopen(f, attribute, H5P_DEFAULT);
    REQUIRE(a >= 0);
    const int64_t v = int64_t(rows);
    REQUIRE(H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0);
    H5Aclose(a);
  }
  H5Fclose(f);
}
}  // namespace

TEST_CASE("a dataset file that declares more rows than it stores is refused before anything is allocated",
          "[dataset]") {
  // Issue 50's rule: cap sizes before allocating. Each file below is a few kilobytes and declares
  // 2^36 rows (hundreds of gigabytes to read); before the check the reader sized its buffers by the
  // declaration (std::bad_alloc, or a machine driven into swap).
  const std::string dir = test::temp_dir("dataset-declared-rows");
  const auto docs = random_docs(40, 300, 299, 11, 200);
  const hsize_t huge = hsize_t(1) << 36;
  const std::string table = dir + "/table.h5";
  write_docs(table, docs, 300, 299);
  REQUIRE(DatasetReader::open(table).documents().size() == docs.size());  // genuine: passes the check
  declare_rows(table,
               {"documents/id", "documents/version", "documents/offset", "documents/length", "documents/event_time",
                "documents/available_time", "documents/owner", "documents/token_sha256"},
               huge, "num_documents");
  CHECK(std::filesystem::file_size(table) < 1000000);
  CHECK_THROWS_AS(DatasetReader::open(table), UsageError);
  CHECK_THROWS_WITH(DatasetReader::open(table),
                    Catch::Contains(table + ": /documents/id declares 68719476736 rows") &&
                        Catch::Contains("the dataset file is damaged; write it again with data-prep"));
  const std::string tokens = dir + "/tokens.h5";
  write_docs(tokens, docs, 300, 299);
  declare_rows(tokens, {"tokens"}, huge, "num_tokens");
  CHECK_THROWS_AS(DatasetReader::open(tokens), UsageError);
  CHECK_THROWS_WITH(DatasetReader::open(tokens),
                    Catch::Contains(tokens + ": /tokens declares 68719476736 rows") &&
                        Catch::Contains("compressed: the dataset file is damaged; write it again with data-prep"));
}
