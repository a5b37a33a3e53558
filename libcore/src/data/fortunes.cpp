#include "shardtrain/data/fortunes.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/time.hpp"

namespace fs = std::filesystem;

namespace shardtrain::data {
namespace {

constexpr std::int64_t kFirstEvent = 978307200;  // 2001-01-01T00:00:00Z
constexpr std::int64_t kSpanS = 631152000;       // the 20 years to 2021-01-01
constexpr std::int64_t kFileStaggerS = 60;       // file i's times are 60 i seconds later
constexpr std::int64_t kPublicationDelayS = 86400;

bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// The length of the valid UTF-8 sequence at s[i], or 0 when the byte there does not start one.
std::size_t utf8_sequence(const std::string& s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte (tighter for E0, ED, F0, F4)
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

// `text` as valid UTF-8 without NUL bytes (see the header).
std::string clean_text(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '\0') {
      ++i;
    } else if (const std::size_t n = utf8_sequence(text, i)) {
      out.append(text, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return out;
}

std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

std::vector<std::string> split_fortunes(const std::string& file_text) {
  std::vector<std::string> pieces(1);
  std::string line;
  bool first = true;
  // Lines split at '\n' only; a "%" line closes the fortune before it.
  for (std::size_t at = 0; at <= file_text.size();) {
    const std::size_t end = std::min(file_text.find('\n', at), file_text.size());
    line.assign(file_text, at, end - at);
    at = end + 1;
    if (line == "%") {
      pieces.emplace_back();
      first = true;
      continue;
    }
    if (!first) pieces.back() += '\n';
    pieces.back() += line;
    first = false;
  }
  std::vector<std::string> kept;
  for (auto& p : pieces) {
    const std::size_t b = p.find_first_not_of('\n'), e = p.find_last_not_of('\n');
    std::string body = b == std::string::npos ? std::string() : p.substr(b, e - b + 1);
    if (std::any_of(body.begin(), body.end(), [](char c) { return !is_space(static_cast<unsigned char>(c)); }))
      kept.push_back(std::move(body));
  }
  return kept;
}

std::string fortune_jsonl_line(const std::string& file_name, std::size_t file_position, std::size_t index,
                               std::size_t count, const std::string& text) {
  const std::int64_t event = kFirstEvent + std::int64_t(index) * kSpanS / std::int64_t(count) +
                             kFileStaggerS * std::int64_t(file_position);
  return "{\"id\": " + json_string(file_name + "/" + std::to_string(index)) + ", \"version\": 1, \"owner\": " +
         json_string(file_name) + ", \"event_time\": \"" + format_rfc3339(event) + "\", \"available_time\": \"" +
         format_rfc3339(event + kPublicationDelayS) + "\", \"text\": " + json_string(clean_text(text)) + "}";
}

FortunesJsonl write_fortunes_jsonl(const std::string& folder, const std::string& out_path) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw UsageError("--fortunes " + folder + ": not a folder (install the fortunes package: apt-get install -y fortunes)");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    const bool index_or_link = name.ends_with(".dat") || name.ends_with(".u8");
    if (!index_or_link && fs::is_regular_file(entry.path(), ec)) names.push_back(name);
  }
  if (ec) throw IoError("--fortunes " + folder + ": cannot list the folder (" + ec.message() + ")");
  if (names.empty()) throw UsageError("--fortunes " + folder + ": no fortunes file in the folder");
  std::sort(names.begin(), names.end());
  FortunesJsonl result{out_path, 0, names.size()};
  std::string jsonl;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string path = (fs::path(folder) / names[i]).string();
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in && !in.eof()) throw IoError(path + ": cannot read the fortunes file");
    const std::vector<std::string> fortunes = split_fortunes(text.str());
    for (std::size_t j = 0; j < fortunes.size(); ++j)
      jsonl += fortune_jsonl_line(names[i], i, j, fortunes.size(), fortunes[j]) + "\n";
    result.documents += fortunes.size();
  }
  write_file_atomically(out_path, jsonl);
  return result;
}

}  // namespace shardtrain::data
