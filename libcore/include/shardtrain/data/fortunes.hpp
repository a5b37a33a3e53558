// The bundled real-text corpus: the Debian `fortunes` package's files as data-prep JSONL, one
// document per fortune, by the rule docs/FORMATS.md states ("Bundled corpora"), so that the corpus
// and its snapshot id are the same on every machine with the same package:
//   * input: every regular file directly in the folder, in name order (byte order); *.dat and
//     *.u8 (strfile's indexes and links) and sub-folders (off/) skipped;
//   * a fortune is the text between lines holding only "%", without leading or trailing newlines;
//     one that is empty or only whitespace is dropped; NUL bytes are removed and bytes that are not
//     UTF-8 become U+FFFD (one each), so every line is valid JSON;
//   * fortune j (0-based) of the n in file i (0-based, name order): id "<file>/<j>", version 1,
//     owner the file's name, event_time 2001-01-01T00:00:00Z + floor(j x 20 years / n) + 60 i
//     seconds (each owner spread over the 20 years, no two files tied, so a cutoff holds out the
//     latest part of every owner), available_time one day (86,400 s) later.
// A line's keys are written in that order (id, version, owner, event_time, available_time, text),
// ", " and ": " between them: the bytes the JSONL has always had.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::data {

// The kept fortunes of one fortunes file's text, in order.
std::vector<std::string> split_fortunes(const std::string& file_text);

// The JSONL line (no newline) of fortune `index` of the `count` in file `file_name`, the file at
// `file_position` in name order.
std::string fortune_jsonl_line(const std::string& file_name, std::size_t file_position, std::size_t index,
                               std::size_t count, const std::string& text);

struct FortunesJsonl {
  std::string output;
  std::uint64_t documents = 0;  // lines written
  std::uint64_t files = 0;      // fortunes files read
};

// Writes the JSONL of the fortunes folder `folder` to `out_path` (replaced atomically). UsageError
// naming the folder when it is not a folder or holds no fortunes file; IoError naming a file that
// cannot be read or written.
FortunesJsonl write_fortunes_jsonl(const std::string& folder, const std::string& out_path);

}  // namespace shardtrain::data
