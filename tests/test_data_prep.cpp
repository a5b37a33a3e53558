// data-prep: round trip of JSONL (text and tokens) and text folders, each class of bad input and its
// error, --skip-bad rejects, the tool's exit codes and messages; the synthetic Markov corpus
// (entropy rate exact on a case solvable by hand, empirical entropy close, fast generation).
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/data/dataset.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/data/synthetic.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::data;

namespace {
DataPrepOptions jsonl_options(const std::string& input, const std::string& output) {
  DataPrepOptions o;
  o.jsonl_inputs = {input};
  o.output = output;
  o.progress_interval_s = 0;
  return o;
}
std::vector<uint32_t> bytes_of(const std::string& s) {
  std::vector<uint32_t> out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}
// Runs a shell command; returns its exit status.
int run(const std::string& cmd) {
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

TEST_CASE("data-prep round-trips JSONL text documents and their metadata", "[data_prep]") {
  const std::string dir = test::temp_dir("prep");
  const std::string input = test::testdata_path("data/valid.jsonl");
  auto summary = run_data_prep(jsonl_options(input, dir + "/valid.h5"));
  CHECK(summary.documents == 5);
  CHECK(summary.owners == 3);
  CHECK(summary.vocab == 256);
  CHECK(summary.tokenizer == "bytes");
  CHECK(summary.rejects == 0);
  CHECK(summary.event_time_min == "2024-01-01T00:00:00Z");
  CHECK(summary.available_time_max == "2024-04-01T00:00:00Z");
  auto r = DatasetReader::open(dir + "/valid.h5");
  CHECK(summary.snapshot_id == r.header().snapshot_id);
  struct Expect { const char* id; int64_t version; const char* event; const char* avail; const char* owner; std::string text; };
  const std::vector<Expect> expect = {
      {"a", 1, "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", "alice", "Hello, world."},
      {"b", 1, "2024-01-03T08:00:00Z", "2024-01-03T09:00:00Z", "bob", "Caf\xc3\xa9 \xe2\x80\x94 \"quoted\"\nsecond line\ttab"},
      {"a", 2, "2024-02-01T00:00:00Z", "2024-02-01T12:00:00Z", "alice", "Hello again."},
      {"c", 7, "2024-03-01T00:00:00Z", "2024-03-05T05:00:00Z", "carol", ""},
      {"d", 1, "2024-04-01T00:00:00Z", "2024-04-01T00:00:00Z", "bob", "CRLF line"}};
  REQUIRE(r.documents().size() == expect.size());
  uint64_t tokens = 0;
  for (std::size_t i = 0; i < expect.size(); ++i) {
    const auto& d = r.documents()[i];
    INFO("document " << i);
    CHECK(d.id == expect[i].id);
    CHECK(d.version == expect[i].version);
    CHECK(d.event_time == parse_rfc3339(expect[i].event));
    CHECK(d.available_time == parse_rfc3339(expect[i].avail));
    CHECK(r.owners()[d.owner] == expect[i].owner);
    CHECK(r.read_document(i) == bytes_of(expect[i].text));
    CHECK(d.token_sha256 == sha256(expect[i].text.data(), expect[i].text.size()));
    tokens += expect[i].text.size();
  }
  CHECK(summary.tokens == tokens);
  REQUIRE(r.sources().size() == 1);
  const std::string raw = test::file_contents(input);
  CHECK(r.sources()[0].sha256_hex == to_hex(sha256(raw.data(), raw.size())));
  CHECK(r.sources()[0].bytes == raw.size());
}

TEST_CASE("data-prep stores pre-tokenised input at the smallest width", "[data_prep]") {
  const std::string dir = test::temp_dir("prep-tokens");
  auto o = jsonl_options(test::testdata_path("data/tokens.jsonl"), dir + "/t.h5");
  o.vocab = 1001;
  o.tokenizer = "test-bpe";
  o.separator = 7;
  auto summary = run_data_prep(o);
  CHECK(summary.token_bits == 16);
  auto r = DatasetReader::open(dir + "/t.h5");
  CHECK(r.header().tokenizer == "test-bpe");
  CHECK(r.read_document(0) == std::vector<uint32_t>{1, 2, 3, 999, 1000});
  CHECK(r.read_document(1) == std::vector<uint32_t>{0, 500});
  // --vocab without tokenizer/separator is refused; text under a non-byte vocab is rejected.
  o.separator.reset();
  CHECK_THROWS_WITH(run_data_prep(o), Catch::Contains("--separator"));
  auto text = jsonl_options(test::testdata_path("data/valid.jsonl"), dir + "/x.h5");
  text.vocab = 1001;
  text.tokenizer = "test-bpe";
  text.separator = 7;
  CHECK_THROWS_WITH(run_data_prep(text), Catch::Contains("valid.jsonl:1: field 'text' needs the bytes tokenizer"));
}

TEST_CASE("each class of bad input is refused with FILE:LINE: reason", "[data_prep]") {
  const std::string dir = test::temp_dir("prep-bad");
  struct Case { const char* file; int line; const char* reason; };
  const std::vector<Case> cases = {
      {"bad_malformed.jsonl", 2, "malformed JSON"},
      {"bad_missing_field.jsonl", 2, "missing field 'version'"},
      {"bad_mistyped_field.jsonl", 2, "field 'version' must be an integer, got string"},
      {"bad_time.jsonl", 2, "field 'event_time': '2024-02-30T00:00:00Z' is not an RFC 3339 date-time (day out of range"},
      {"bad_available_before_event.jsonl", 2, "available_time 2024-01-01T23:59:59Z is before event_time 2024-01-02T00:00:00Z"},
      {"bad_duplicate.jsonl", 3, "repeated (id, version) = (\"good\", 1)"},
      {"bad_token_out_of_vocab.jsonl", 2, "token 1000 at index 2 is outside the vocab [0, 1000)"},
      {"bad_separator.jsonl", 2, "NUL byte"},
  };
  for (const auto& c : cases) {
    INFO(c.file);
    const std::string input = test::testdata_path(std::string("data/") + c.file);
    auto o = jsonl_options(input, dir + "/out.h5");
    if (std::string(c.file) == "bad_token_out_of_vocab.jsonl") {
      o.vocab = 1000;
      o.tokenizer = "t";
      o.separator = 999;
    }
    try {
      run_data_prep(o);
      FAIL("no error");
    } catch (const UsageError& e) {
      const std::string msg = e.what();
      CHECK(msg.rfind(input + ":" + std::to_string(c.line) + ": ", 0) == 0);
      CHECK_THAT(msg, Catch::Contains(c.reason));
      CHECK(msg.find('\n') == std::string::npos);
      CHECK(e.code() == ExitCode::kUsage);
    }
    CHECK(std::filesystem::is_empty(dir));  // no output, no temporary file left behind
  }
}

TEST_CASE("skip-bad mode writes every reject with its reason and counts them", "[data_prep]") {
  const std::string dir = test::temp_dir("prep-skip");
  auto o = jsonl_options(test::testdata_path("data/mixed.jsonl"), dir + "/m.h5");
  o.skip_bad = dir + "/rejects.jsonl";
  auto summary = run_data_prep(o);
  CHECK(summary.documents == 3);
  CHECK(summary.rejects == 7);
  CHECK(summary.rejects_file == dir + "/rejects.jsonl");
  const auto& by = summary.rejects_by_class;
  for (const char* cls : {"malformed_json", "missing_field", "mistyped_field", "bad_time", "available_before_event",
                          "duplicate_id_version", "separator_in_document"}) {
    INFO(cls);
    CHECK((by.count(cls) ? by.at(cls) : 0) == 1);
  }
  std::ifstream in(dir + "/rejects.jsonl");
  std::string line;
  std::vector<int> lines;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    CHECK(j["file"] == test::testdata_path("data/mixed.jsonl"));
    CHECK_FALSE(j["reason"].get<std::string>().empty());
    CHECK(j.contains("input"));
    lines.push_back(j["line"]);
  }
  CHECK(lines == std::vector<int>{2, 3, 4, 6, 7, 8, 9});
  auto r = DatasetReader::open(dir + "/m.h5");
  REQUIRE(r.documents().size() == 3);
  CHECK(r.documents()[0].id == "g1");
  CHECK(r.documents()[2].id == "g3");
  CHECK(r.read_document(0) == bytes_of("good one"));
}

TEST_CASE("text input reads files and folders as one document per file", "[data_prep]") {
  const std::string dir = test::temp_dir("prep-text");
  DataPrepOptions o;
  o.text_inputs = {test::testdata_path("data/text")};
  o.output = dir + "/t.h5";
  o.progress_interval_s = 0;
  o.text.event_time = "2020-05-01T00:00:00Z";
  o.text.version = 3;
  auto summary = run_data_prep(o);
  CHECK(summary.documents == 2);  // the hidden file is skipped
  auto r = DatasetReader::open(dir + "/t.h5");
  CHECK(r.documents()[0].id == "one.txt");
  CHECK(r.documents()[1].id == "sub/two.txt");
  CHECK(r.documents()[1].version == 3);
  CHECK(r.owners()[r.documents()[1].owner] == "two.txt");
  CHECK(r.documents()[0].event_time == parse_rfc3339("2020-05-01T00:00:00Z"));
  CHECK(r.documents()[0].available_time == r.documents()[0].event_time);
  CHECK(r.read_document(1) == bytes_of("Second, in a folder.\n"));
  CHECK(r.sources().size() == 2);
}

TEST_CASE("the data-prep tool exits 0/2/3 and prints one error line", "[data_prep]") {
  const std::string dir = test::temp_dir("prep-tool");
  const std::string tool = test::tool_path("data-prep");
  REQUIRE(std::filesystem::exists(tool));
  CHECK(run(tool + " --help > " + dir + "/help.txt") == 0);
  CHECK_THAT(test::file_contents(dir + "/help.txt"), Catch::Contains("--skip-bad"));
  CHECK(run(tool + " --no-such-option > /dev/null 2>&1") == 2);
  CHECK(run(tool + " " + test::testdata_path("data/valid.jsonl") + " > /dev/null 2>&1") == 2);  // no -o
  CHECK(run(tool + " " + test::testdata_path("data/valid.jsonl") + " -o " + dir + "/ok.h5 --progress-interval 0 > " +
            dir + "/summary.json 2> " + dir + "/err.txt") == 0);
  // The printed summary is the DataPrepResult's JSON: read back through its one reader.
  auto summary = DataPrepResult::from_json(JsonFile::read(dir + "/summary.json", "data-prep's summary"));
  CHECK(summary.documents == 5);
  const std::string bad = test::testdata_path("data/bad_time.jsonl");
  CHECK(run(tool + " " + bad + " -o " + dir + "/bad.h5 2> " + dir + "/err.txt") == 2);
  const std::string err = test::file_contents(dir + "/err.txt");
  CHECK(err.rfind("[rank 0/1] error: " + bad + ":2: field 'event_time'", 0) == 0);
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(run(tool + " " + dir + "/missing.jsonl -o " + dir + "/m.h5 2> /dev/null") == 3);
  CHECK(run(tool + " --synthetic markov --documents 2 --doc-tokens 100 -o " + dir + "/mk.h5 > /dev/null 2>&1") == 0);
}

TEST_CASE("markov entropy rate is exact on a two-state chain", "[data_prep][synthetic]") {
  // P = [[1-a, a], [b, 1-b]]: pi = (b, a)/(a+b), H = pi0 h(a) + pi1 h(b) with h the binary entropy.
  const double a = 0.3, b = 0.1;
  std::vector<double> P = {1 - a, a, b, 1 - b};
  std::vector<double> pi;
  const double H = markov_entropy_rate(P, 2, &pi);
  auto h = [](double p) { return -p * std::log(p) - (1 - p) * std::log(1 - p); };
  CHECK(pi[0] == Approx(b / (a + b)).epsilon(1e-12));
  CHECK(H == Approx(b / (a + b) * h(a) + a / (a + b) * h(b)).epsilon(1e-12));
}

TEST_CASE("the synthetic corpus matches its entropy and is fast to generate", "[data_prep][synthetic]") {
  MarkovOptions o;  // defaults: 16 symbols, 20 x 10000 tokens
  MarkovSource src(o);
  const int n = src.symbols();
  for (int i = 0; i < n; ++i) {
    double row = 0, flow = 0;
    for (int j = 0; j < n; ++j) row += src.transition(i, j);
    for (int j = 0; j < n; ++j) flow += src.stationary()[j] * src.transition(j, i);
    CHECK(row == Approx(1.0).epsilon(1e-12));
    CHECK(flow == Approx(src.stationary()[i]).epsilon(1e-10));  // pi P = pi
  }
  const double H = src.entropy_nats_per_token();
  CHECK(H > 0.3);
  CHECK(H < std::log(double(n)));
  // Empirical conditional entropy of the generated tokens (plug-in estimate) is close to H.
  std::vector<double> counts(n * n, 0.0);
  for (uint64_t k = 0; k < o.documents; ++k) {
    auto doc = src.document(k);
    for (std::size_t t = 1; t < doc.size(); ++t) counts[doc[t - 1] * n + doc[t]] += 1;
  }
  double total = 0, Hhat = 0;
  for (double c : counts) total += c;
  for (int i = 0; i < n; ++i) {
    double row = 0;
    for (int j = 0; j < n; ++j) row += counts[i * n + j];
    for (int j = 0; j < n; ++j)
      if (counts[i * n + j] > 0) Hhat -= counts[i * n + j] / total * std::log(counts[i * n + j] / row);
  }
  CHECK(Hhat == Approx(H).epsilon(0.01));
  // Same seed, same corpus; another seed, another chain.
  CHECK(MarkovSource(o).document(3) == src.document(3));
  MarkovOptions other = o;
  other.seed = 2;
  CHECK(MarkovSource(other).entropy_nats_per_token() != H);

  const std::string dir = test::temp_dir("markov");
  auto t0 = std::chrono::steady_clock::now();
  auto summary = write_markov_dataset(dir + "/m.h5", o);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 1.0);
  CHECK(summary.tokens == 200000);
  auto r = DatasetReader::open(dir + "/m.h5");
  CHECK(r.header().vocab == n + 1);
  CHECK(r.header().separator_token == n);
  CHECK(r.double_attribute("entropy_nats_per_token").value() == H);
  CHECK(r.read_document(3) == src.document(3));
  CHECK(r.owners().size() == 2);
  // The JSONL route through data-prep gives the same dataset snapshot.
  write_markov_jsonl(dir + "/m.jsonl", o);
  auto p = jsonl_options(dir + "/m.jsonl", dir + "/m2.h5");
  p.vocab = n + 1;
  p.tokenizer = "markov16";
  p.separator = n;
  CHECK(run_data_prep(p).snapshot_id == summary.snapshot_id);
}

TEST_CASE("the synthetic chain at GPT-2's vocabulary is sparse and bounded", "[data_prep][synthetic]") {
  // 50256 symbols (vocab 50257, GPT-2's) and the largest count: a dense matrix would be 20 GB and
  // 34 GB of doubles (the generator once indexed it in int and crashed); the sparse chain holds at
  // most symbols x (extra_successors + 2) entries.
  for (const int n : {50256, kMaxMarkovSymbols}) {
    INFO("symbols " << n);
    MarkovOptions o;
    o.symbols = n;
    o.documents = 2;
    o.tokens_per_document = 2000;
    const auto t0 = std::chrono::steady_clock::now();
    MarkovSource src(o);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(seconds < 10.0);
    const SparseChain& chain = src.chain();
    CHECK(chain.successor.size() <= std::size_t(n) * std::size_t(o.extra_successors + 2));
    CHECK(chain.successor.size() >= std::size_t(n));  // every state has its i+1 successor
    // Rows sum to 1, and pi P = pi at a spread of states (the full check is the two loops below).
    std::vector<double> flow(std::size_t(n), 0.0);
    std::size_t lookups_wrong = 0;
    for (int i = 0; i < n; ++i) {
      double row = 0;
      for (std::size_t at = chain.row_begin[i]; at < chain.row_begin[i + 1]; ++at) {
        row += chain.probability[at];
        flow[chain.successor[at]] += src.stationary()[std::size_t(i)] * chain.probability[at];
        lookups_wrong += src.transition(i, int(chain.successor[at])) != chain.probability[at];
      }
      if (std::fabs(row - 1.0) > 1e-12) FAIL("row " << i << " sums to " << row);
    }
    CHECK(lookups_wrong == 0);
    double worst = 0;
    for (int j = 0; j < n; ++j) worst = std::max(worst, std::fabs(flow[std::size_t(j)] - src.stationary()[std::size_t(j)]));
    CHECK(worst < 1e-12);
    CHECK(src.transition(5, 5) == 0.0);  // not a successor: no self-loop except state 0's
    // H is below the uniform-successor bound ln(extra + 2) and positive.
    CHECK(src.entropy_nats_per_token() > 0.1);
    CHECK(src.entropy_nats_per_token() < std::log(double(o.extra_successors + 2)));
    for (std::uint32_t token : src.document(1)) CHECK(token < std::uint32_t(n));
  }
}

TEST_CASE("data-prep --synthetic takes GPT-2's vocabulary and names the range of a bad count", "[data_prep][synthetic]") {
  const std::string dir = test::temp_dir("markov-range");
  const std::string tool = test::tool_path("data-prep") + " --synthetic markov --documents 2 --doc-tokens 500";
  for (const int n : {50256, 65535}) {
    INFO("symbols " << n);
    CHECK(run(tool + " --symbols " + std::to_string(n) + " -o " + dir + "/m" + std::to_string(n) + ".h5 > /dev/null") == 0);
    CHECK(DatasetReader::open(dir + "/m" + std::to_string(n) + ".h5").header().vocab == n + 1);
  }
  for (const std::string bad : {"65536", "1", "0", "-3", "2147483647"}) {
    INFO("symbols " << bad);
    CHECK(run(tool + " --symbols " + bad + " -o " + dir + "/bad.h5 2> " + dir + "/err.txt") == 2);
    CHECK(test::file_contents(dir + "/err.txt").find("--symbols must be in [2, 65535]") != std::string::npos);
  }
  CHECK(run(tool + " --successors 65 -o " + dir + "/bad.h5 2> " + dir + "/err.txt") == 2);
  CHECK(test::file_contents(dir + "/err.txt").find("--successors must be in [0, 15]") != std::string::npos);  // 16 symbols
}

namespace {
// An llm.c token shard as its format is documented (data/llmc_shard.hpp): 256 little-endian int32
// (magic, version, N, zeros), then N uint16 tokens; each document preceded by end-of-text.
void write_llmc_shard(const std::string& path, const std::vector<std::uint16_t>& tokens, std::int32_t magic = 20240520,
                      std::int32_t version = 1, std::int64_t extra_bytes = 0) {
  std::vector<std::int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = std::int32_t(tokens.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(2 * tokens.size() + extra_bytes));
}
}  // namespace

TEST_CASE("data-prep --llmc keeps every token and document boundary of an llm.c shard", "[data_prep][llmc]") {
  const std::string dir = test::temp_dir("prep-llmc");
  // Documents of varied lengths, the largest id 50255 and id 0 among them; an empty run (two
  // end-of-text tokens in a row) is no document.
  std::vector<std::vector<std::uint32_t>> docs;
  std::uint32_t x = 12345;
  for (int d = 0; d < 30; ++d) {
    std::vector<std::uint32_t> doc;
    for (int t = 0; t < 1 + (d * 37) % 500; ++t) {
      x = x * 1103515245u + 12345u;
      doc.push_back((x >> 8) % 50256);
    }
    docs.push_back(doc);
  }
  docs[4] = {50255, 0, 50255};
  std::vector<std::uint16_t> tokens;
  for (std::size_t d = 0; d < docs.size(); ++d) {
    tokens.push_back(50256);
    if (d == 10) tokens.push_back(50256);  // an empty run
    for (auto t : docs[d]) tokens.push_back(std::uint16_t(t));
  }
  write_llmc_shard(dir + "/shard.bin", tokens);
  DataPrepOptions o;
  o.llmc_inputs = {dir + "/shard.bin"};
  o.output = dir + "/shard.h5";
  o.progress_interval_s = 0;
  o.text.owner = "web";
  o.text.event_time = "2024-05-01T00:00:00Z";
  o.text.version = 3;
  const auto summary = run_data_prep(o);
  CHECK(summary.documents == docs.size());
  CHECK(summary.sources.at(0).bytes == 1024 + 2 * tokens.size());
  const auto r = DatasetReader::open(dir + "/shard.h5");
  CHECK(r.header().vocab == 50257);
  CHECK(r.header().tokenizer == "gpt2");
  CHECK(r.header().separator_token == 50256);
  CHECK(r.header().token_bits == 16);
  REQUIRE(r.documents().size() == docs.size());
  for (std::size_t d = 0; d < docs.size(); ++d) {
    CHECK(r.read_document(d) == docs[d]);
    CHECK(r.documents()[d].id == dir + "/shard.bin:" + std::to_string(d));
    CHECK(r.documents()[d].version == 3);
    CHECK(r.owners()[r.documents()[d].owner] == "web");
    CHECK(format_rfc3339(r.documents()[d].event_time) == "2024-05-01T00:00:00Z");
  }
  // Refusals, naming the file: another magic, another version, a size other than 1024 + 2N.
  write_llmc_shard(dir + "/magic.bin", tokens, 20240501);
  write_llmc_shard(dir + "/version.bin", tokens, 20240520, 2);
  write_llmc_shard(dir + "/short.bin", tokens, 20240520, 1, -2);
  for (const auto& [file, why] : {std::pair<std::string, std::string>{"magic.bin", "magic 20240501"},
                                  {"version.bin", "version 2"},
                                  {"short.bin", "truncated"}}) {
    o.llmc_inputs = {dir + "/" + file};
    o.output = dir + "/bad.h5";
    CHECK_THROWS_WITH(run_data_prep(o), Catch::Contains(file) && Catch::Contains(why));
  }
}
