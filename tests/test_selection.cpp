// Cutoff selection: a property test on random metadata (nothing available after the cutoff is
// trained on, the newest eligible version is picked, the hold-out is the newest version after
// eval_from, the snapshot id changes exactly when the selection changes); the training view's
// streams, samples and per-owner hold-out slices on a small file.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "shardtrain/data/dataset.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/data/selection.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::data;

namespace {
std::vector<DocumentRecord> random_table(std::mt19937_64& gen, std::size_t n) {
  std::vector<DocumentRecord> docs;
  std::map<std::pair<std::string, int64_t>, bool> used;
  while (docs.size() < n) {
    DocumentRecord d;
    d.id = "id" + std::to_string(gen() % 25);
    d.version = int64_t(gen() % 6);
    if (used[{d.id, d.version}]) continue;
    used[{d.id, d.version}] = true;
    d.event_time = int64_t(gen() % 1000);
    d.available_time = d.event_time + int64_t(gen() % 300);
    d.owner = uint32_t(gen() % 3);
    d.length = gen() % 20;
    for (auto& byte : d.token_sha256) byte = uint8_t(gen());
    docs.push_back(d);
  }
  return docs;
}
// Brute force: newest version (max version) of each id among documents satisfying pred.
template <class Pred>
std::vector<std::size_t> brute_newest(const std::vector<DocumentRecord>& docs, Pred pred) {
  std::map<std::string, std::size_t> best;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    if (!pred(docs[i])) continue;
    auto it = best.find(docs[i].id);
    if (it == best.end() || docs[i].version > docs[it->second].version) best[docs[i].id] = i;
  }
  std::vector<std::size_t> out;
  for (auto& kv : best) out.push_back(kv.second);
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST_CASE("cutoff selection property test on random metadata", "[selection]") {
  std::mt19937_64 gen(2024);
  for (int trial = 0; trial < 200; ++trial) {
    auto docs = random_table(gen, 1 + gen() % 80);
    std::vector<std::optional<int64_t>> cutoffs = {std::nullopt};
    for (int k = 0; k < 12; ++k) cutoffs.push_back(int64_t(gen() % 1400) - 50);
    std::vector<std::pair<Selection, std::optional<int64_t>>> results;
    for (auto cutoff : cutoffs) {
      for (std::optional<int64_t> eval_from : {std::optional<int64_t>{}, std::optional<int64_t>(int64_t(gen() % 1200))}) {
        Selection s = select_documents(docs, cutoff, eval_from);
        auto E = eval_from ? eval_from : cutoff;
        for (auto i : s.train) {
          // Never anything available after the cutoff, nothing from the hold-out period.
          if (cutoff) REQUIRE(docs[i].available_time <= *cutoff);
          if (E) REQUIRE(docs[i].event_time <= *E);
        }
        if (!s.holdout.empty()) REQUIRE(E.has_value());
        for (auto i : s.holdout) REQUIRE(docs[i].event_time > *E);
        REQUIRE(s.train == brute_newest(docs, [&](const DocumentRecord& d) {
                  return (!cutoff || d.available_time <= *cutoff) && (!E || d.event_time <= *E);
                }));
        REQUIRE(s.holdout == brute_newest(docs, [&](const DocumentRecord& d) { return E && d.event_time > *E; }));
        REQUIRE(std::is_sorted(s.train.begin(), s.train.end()));
        results.emplace_back(s, cutoff);
      }
    }
    // The id changes exactly when the selection changes.
    for (std::size_t a = 0; a < results.size(); ++a)
      for (std::size_t b = a + 1; b < results.size(); ++b) {
        const auto& x = results[a].first;
        const auto& y = results[b].first;
        bool same = x.train == y.train && x.holdout == y.holdout;
        REQUIRE((x.snapshot_id == y.snapshot_id) == same);
      }
    // Content matters too: same documents, different tokens -> different id.
    if (!docs.empty()) {
      Selection before = select_documents(docs, std::nullopt, std::nullopt);
      docs[before.train.front()].token_sha256[0] ^= 1;
      CHECK(select_documents(docs, std::nullopt, std::nullopt).snapshot_id != before.snapshot_id);
    }
  }
}

TEST_CASE("samples are seq_len+1 tokens at stride seq_len", "[selection]") {
  CHECK(samples_in_stream(0, 4) == 0);
  CHECK(samples_in_stream(4, 4) == 0);
  CHECK(samples_in_stream(5, 4) == 1);
  CHECK(samples_in_stream(8, 4) == 1);
  CHECK(samples_in_stream(9, 4) == 2);
  CHECK(samples_in_stream(1000001, 1000) == 1000);
}

namespace {
// Documents: (id, version, event, available, owner, text).
struct Row {
  std::string id;
  int64_t version;
  const char* event;
  const char* available;
  std::string owner;
  std::string text;
};
const std::vector<Row> kRows = {
    {"a", 1, "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", "news", "alpha one."},
    {"b", 1, "2024-01-05T00:00:00Z", "2024-01-05T00:00:00Z", "blog", "bravo."},
    {"a", 2, "2024-01-01T00:00:00Z", "2024-03-01T00:00:00Z", "news", "alpha TWO (revised)."},
    {"c", 1, "2024-02-10T00:00:00Z", "2024-02-11T00:00:00Z", "blog", "charlie in february."},
    {"d", 1, "2024-02-20T00:00:00Z", "2024-02-21T00:00:00Z", "news", "delta, late february, held out."},
    {"e", 3, "2024-02-25T00:00:00Z", "2024-02-25T00:00:00Z", "blog", "echo three."},
    {"f", 1, "2024-01-20T00:00:00Z", "2024-01-21T00:00:00Z", "wiki", "foxtrot."},
};
std::string write_rows(const std::string& path) {
  DatasetWriter w(path, 256, "bytes", 0);
  for (const auto& r : kRows)
    w.add_document(r.id, r.version, parse_rfc3339(r.event), parse_rfc3339(r.available), r.owner,
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(r.text.data()), r.text.size()));
  w.finish();
  return path;
}
std::vector<int32_t> concat(const std::vector<std::string>& texts) {
  std::vector<int32_t> out;
  for (std::size_t k = 0; k < texts.size(); ++k) {
    if (k > 0) out.push_back(0);
    for (unsigned char c : texts[k]) out.push_back(c);
  }
  return out;
}
void check_stream(const TrainingData& d, const std::vector<int32_t>& stream, bool holdout, uint64_t first = 0) {
  const int T = d.seq_len();
  const uint64_t n = samples_in_stream(stream.size(), T);
  std::vector<int32_t> sample(T + 1);
  for (uint64_t i = 0; i < n; ++i) {
    if (holdout) d.read_holdout_sample(first + i, sample.data());
    else d.read_train_sample(i, sample.data());
    REQUIRE(std::vector<int32_t>(stream.begin() + i * T, stream.begin() + i * T + T + 1) == sample);
  }
}
}  // namespace

TEST_CASE("the training view concatenates the selected documents and slices the hold-out by owner", "[selection]") {
  const std::string path = write_rows(test::temp_dir("selection") + "/rows.h5");
  const int T = 5;
  {  // No cutoff: newest version of everything, no hold-out.
    auto d = TrainingData::open(path, {std::nullopt, std::nullopt, T});
    auto stream = concat({"bravo.", "alpha TWO (revised).", "charlie in february.", "delta, late february, held out.",
                          "echo three.", "foxtrot."});
    CHECK(d.num_train_tokens() == stream.size());
    CHECK(d.num_train_samples() == samples_in_stream(stream.size(), T));
    check_stream(d, stream, false);
    CHECK(d.num_holdout_samples() == 0);
    CHECK(d.holdout_slices().empty());
    CHECK(d.vocab() == 256);
    CHECK(d.separator_token() == 0);
    CHECK(d.dataset_snapshot_id() == DatasetReader::open(path).header().snapshot_id);
  }
  // Cutoff mid-February: a@v2 is not yet available (a@v1 is used), d and e are after it.
  auto d = TrainingData::open(path, {std::string("2024-02-15T00:00:00Z"), std::nullopt, T});
  CHECK(d.num_train_documents() == 4);
  check_stream(d, concat({"alpha one.", "bravo.", "charlie in february.", "foxtrot."}), false);
  CHECK(d.num_holdout_documents() == 2);
  REQUIRE(d.holdout_slices().size() == 2);  // by owner name: blog, news
  const auto& blog = d.holdout_slices()[0];
  const auto& news = d.holdout_slices()[1];
  CHECK(blog.owner == "blog");
  CHECK(news.owner == "news");
  auto blog_stream = concat({"echo three."});
  auto news_stream = concat({"delta, late february, held out."});
  CHECK(blog.tokens == blog_stream.size());
  CHECK(blog.samples == samples_in_stream(blog_stream.size(), T));
  CHECK(news.first_sample == blog.samples);
  CHECK(d.num_holdout_samples() == blog.samples + news.samples);
  check_stream(d, blog_stream, true, blog.first_sample);
  check_stream(d, news_stream, true, news.first_sample);
  CHECK(d.holdout_slice_of(0) == 0);
  CHECK(d.holdout_slice_of(news.first_sample) == 1);
  auto j = json_fields::write(d.describe());
  CHECK(j["cutoff"] == "2024-02-15T00:00:00Z");
  CHECK(j["eval_from"] == "2024-02-15T00:00:00Z");
  CHECK(j["train"]["documents"] == 4);
  CHECK(j["holdout"]["slices"].size() == 2);

  // Another cutoff in the same quiet period selects the same documents: same selection id.
  auto same = TrainingData::open(path, {std::string("2024-02-16T12:00:00+01:00"), std::nullopt, T});
  CHECK(same.selection_snapshot_id() == d.selection_snapshot_id());
  // After a@v2 becomes available the selection (and its id) changes.
  auto later = TrainingData::open(path, {std::string("2024-03-02T00:00:00Z"), std::nullopt, T});
  CHECK(later.selection_snapshot_id() != d.selection_snapshot_id());
  // eval_from before the cutoff moves c (February 10) into the hold-out.
  auto early_eval = TrainingData::open(path, {std::string("2024-02-15T00:00:00Z"), std::string("2024-02-01T00:00:00Z"), T});
  CHECK(early_eval.num_train_documents() == 3);
  CHECK(early_eval.num_holdout_documents() == 3);

  std::vector<int32_t> buf(T + 1);
  CHECK_THROWS_AS(d.read_train_sample(d.num_train_samples(), buf.data()), UsageError);
  CHECK_THROWS_AS(d.read_holdout_sample(d.num_holdout_samples(), buf.data()), UsageError);
  CHECK_THROWS_WITH(TrainingData::open(path, {std::string("2024-02-15"), std::nullopt, T}), Catch::Contains("--cutoff"));
  CHECK_THROWS_AS(TrainingData::open(path, {std::nullopt, std::nullopt, 0}), UsageError);
  CHECK_THROWS_AS(TrainingData::open(path + ".missing", {std::nullopt, std::nullopt, T}), IoError);
}
