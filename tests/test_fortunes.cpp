// The bundled fortunes corpus (data/fortunes.hpp): how a fortunes file splits into documents, each
// document's JSONL line (times worked by hand from the rule in docs/FORMATS.md, "Bundled
// corpora"), and the folder's files in name order. The whole Debian corpus was also checked once
// against the Python converter this replaced: the same 15,217 lines, byte for byte (commit message).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/data/fortunes.hpp"
#include "test_support.hpp"

using namespace shardtrain;
namespace fs = std::filesystem;

TEST_CASE("fortunes: a file splits at lines holding only %, empty and blank fortunes dropped", "[data][fortunes]") {
  using V = std::vector<std::string>;
  CHECK(data::split_fortunes("one\nline two\n%\nthree\n%\n") == V{"one\nline two", "three"});
  // Newlines around a fortune go; other whitespace and inner blank lines stay.
  CHECK(data::split_fortunes("\n\n  indented\n\ngap\n\n%\n") == V{"  indented\n\ngap"});
  // Empty and whitespace-only fortunes are not documents; the last needs no closing %.
  CHECK(data::split_fortunes("%\n%\n \t\n%\nlast") == V{"last"});
  // A line with more than % is text, and \r is kept (lines end at \n only).
  CHECK(data::split_fortunes("50% off\r\n%\n") == V{"50% off\r"});
  CHECK(data::split_fortunes("").empty());
}

TEST_CASE("fortunes: a document's JSONL line, its times from the file's place and the fortune's", "[data][fortunes]") {
  // File 1 (the second in name order), fortune 1 of 2: 2001-01-01 + half of 20 years (315,576,000 s:
  // 3,652 days and 12 hours) + 60 s = 2011-01-01T12:01:00Z; available a day later.
  CHECK(data::fortune_jsonl_line("law", 1, 1, 2, "Hi") ==
        R"({"id": "law/1", "version": 1, "owner": "law", "event_time": "2011-01-01T12:01:00Z", )"
        R"("available_time": "2011-01-02T12:01:00Z", "text": "Hi"})");
  // File 0, fortune 0: the start of the span itself.
  CHECK(data::fortune_jsonl_line("art", 0, 0, 7, "x").find(R"("event_time": "2001-01-01T00:00:00Z")") !=
        std::string::npos);
  // JSON escapes; UTF-8 kept as it is; a byte that is not UTF-8 becomes U+FFFD; NUL removed.
  const std::string line = data::fortune_jsonl_line("f", 0, 0, 1, std::string("a\"b\\c\td\x01\n\xC3\xA9\xFF|\0|", 17));
  CHECK(line.substr(line.find("\"text\"")) == "\"text\": \"a\\\"b\\\\c\\td\\u0001\\n\xC3\xA9\xEF\xBF\xBD||\"}");
}

TEST_CASE("fortunes: a folder's fortunes files in name order, indexes and sub-folders skipped", "[data][fortunes]") {
  const std::string dir = test::temp_dir("fortunes");
  fs::create_directories(dir + "/in/off");
  std::ofstream(dir + "/in/zoo") << "z1\n%\nz2\n";
  std::ofstream(dir + "/in/ant") << "a1\n";
  std::ofstream(dir + "/in/ant.dat") << "index\n";
  std::ofstream(dir + "/in/ant.u8") << "link\n";
  std::ofstream(dir + "/in/off/rude") << "skipped\n";
  const data::FortunesJsonl r = data::write_fortunes_jsonl(dir + "/in", dir + "/out.jsonl");
  CHECK(r.documents == 3);
  CHECK(r.files == 2);
  const std::string text = test::file_contents(dir + "/out.jsonl");
  const auto at = [&](const std::string& id) { return text.find("\"id\": \"" + id + "\""); };
  REQUIRE(at("ant/0") != std::string::npos);
  CHECK(at("ant/0") < at("zoo/0"));
  CHECK(at("zoo/0") < at("zoo/1"));
  CHECK(text.find("skipped") == std::string::npos);
  CHECK(text.find("index") == std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);

  CHECK_THROWS_AS(data::write_fortunes_jsonl(dir + "/missing", dir + "/x.jsonl"), UsageError);
  fs::create_directories(dir + "/empty");
  CHECK_THROWS_WITH(data::write_fortunes_jsonl(dir + "/empty", dir + "/x.jsonl"),
                    "--fortunes " + dir + "/empty: no fortunes file in the folder");
}
