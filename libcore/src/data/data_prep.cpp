// data-prep: JSONL / text ingestion with validation, rejects, progress and summary (data_prep.hpp).
#include "shardtrain/data/data_prep.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <unordered_set>

#include "shardtrain/data/dataset.hpp"
#include "shardtrain/data/llmc_shard.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stopwatch.hpp"

namespace shardtrain::data {

namespace {
namespace fs = std::filesystem;

// A rejected input line: its class (for counting) and a one-line reason.
struct Reject {
  std::string cls;
  std::string reason;
};
struct RejectError {
  Reject reject;
};
[[noreturn]] void reject(const char* cls, std::string reason) { throw RejectError{{cls, std::move(reason)}}; }

const char* json_type_name(const nlohmann::json& j) { return j.type_name(); }

// Reads a file (or stdin) in large blocks, hashing every byte, and splits it into lines.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path) {
    if (path == "-") {
      file_ = stdin;
    } else {
      file_ = std::fopen(path.c_str(), "rb");
      if (!file_) throw IoError("cannot open " + path + ": " + std::strerror(errno));
      struct stat st;
      if (::stat(path.c_str(), &st) == 0) size_ = uint64_t(st.st_size);
    }
    buf_.resize(kBlock);
  }
  ~LineReader() {
    if (file_ && file_ != stdin) std::fclose(file_);
  }
  // Next line without its '\n' (and without a trailing '\r'); false at end of input.
  bool next(std::string_view& line) {
    for (;;) {
      const char* begin = buf_.data() + pos_;
      const char* nl = static_cast<const char*>(std::memchr(begin, '\n', end_ - pos_));
      if (nl) {
        std::size_t len = std::size_t(nl - begin);
        pos_ += len + 1;
        line = trim_cr(std::string_view(begin, len));
        return true;
      }
      if (eof_) {
        if (pos_ == end_) return false;
        line = trim_cr(std::string_view(begin, end_ - pos_));
        pos_ = end_;
        return true;
      }
      fill();
    }
  }
  uint64_t bytes_read() const { return bytes_read_; }
  std::optional<uint64_t> size() const { return size_; }
  SourceRecord source() { return {path_, to_hex(hash_.digest()), bytes_read_}; }

 private:
  static constexpr std::size_t kBlock = std::size_t(4) << 20;
  static std::string_view trim_cr(std::string_view s) {
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    return s;
  }
  void fill() {
    // Keep the partial line, grow the buffer if one line is longer than it.
    std::size_t keep = end_ - pos_;
    std::memmove(buf_.data(), buf_.data() + pos_, keep);
    pos_ = 0;
    end_ = keep;
    if (buf_.size() - end_ < kBlock / 2) buf_.resize(std::max(buf_.size() * 2, end_ + kBlock));
    std::size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, file_);
    if (got == 0) {
      if (std::ferror(file_)) throw IoError("cannot read " + path_ + ": " + std::strerror(errno));
      eof_ = true;
    }
    hash_.update(buf_.data() + end_, got);
    end_ += got;
    bytes_read_ += got;
  }

  std::string path_;
  FILE* file_ = nullptr;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  uint64_t bytes_read_ = 0;
  std::optional<uint64_t> size_;
  Sha256 hash_;
};

uint64_t key_hash(const std::string& id, int64_t version) {
  return mix64(fnv1a64(id) ^ (uint64_t(version) * 0x9e3779b97f4a7c15ULL));  // FNV-1a 64, then splitmix
}

struct TimeRange {
  std::optional<int64_t> lo, hi;
  void add(int64_t t) {
    lo = lo ? std::min(*lo, t) : t;
    hi = hi ? std::max(*hi, t) : t;
  }
  std::optional<std::string> min() const { return lo ? std::optional(format_rfc3339(*lo)) : std::nullopt; }
  std::optional<std::string> max() const { return hi ? std::optional(format_rfc3339(*hi)) : std::nullopt; }
};

// The whole run's state.
class Prep {
 public:
  explicit Prep(const DataPrepOptions& o) : o_(o) {
    if (o.output.empty()) throw UsageError("data-prep: an output file is required (-o FILE)");
    if (o.jsonl_inputs.empty() && o.text_inputs.empty() && o.llmc_inputs.empty())
      throw UsageError("data-prep: no input: give JSONL files (or - for stdin), --text PATH and/or --llmc SHARD");
    const bool gpt2 = !o.llmc_inputs.empty();  // llm.c shards: GPT-2 ids unless told otherwise
    vocab_ = o.vocab.value_or(gpt2 ? kGpt2Vocab : kByteVocab);
    if (o.vocab && (!o.tokenizer || !o.separator))
      throw UsageError("data-prep: --vocab needs --tokenizer NAME and --separator TOKEN (the document "
                       "separator id) as well");
    tokenizer_ = o.tokenizer.value_or(gpt2 ? "gpt2" : kByteTokenizer);
    separator_ = o.separator.value_or(gpt2 ? kGpt2EndOfText : kByteSeparator);
    if (gpt2 && (vocab_ > 65536 || separator_ < 0 || separator_ > 65535))
      throw UsageError("data-prep: --llmc shards hold uint16 tokens: --vocab must be at most 65,536 and --separator "
                       "below 65,536");
    bytes_ok_ = vocab_ == kByteVocab && tokenizer_ == kByteTokenizer;
    if (!o.text_inputs.empty() && !bytes_ok_)
      throw UsageError("data-prep: --text needs the bytes tokenizer (vocab 256), but --vocab " +
                       std::to_string(vocab_) + " --tokenizer " + tokenizer_ + " was given");
    if (o.available_by) available_by_ = parse_rfc3339(*o.available_by, "--available-by");
    writer_ = std::make_unique<DatasetWriter>(o.output, vocab_, tokenizer_, separator_);
    if (o.skip_bad) {
      rejects_.open(*o.skip_bad, std::ios::binary | std::ios::trunc);
      if (!rejects_) throw IoError("cannot write the rejects file " + *o.skip_bad);
    }
  }

  DataPrepResult run() {
    elapsed_.restart();
    since_progress_.restart();
    for (const auto& path : o_.jsonl_inputs) read_jsonl(path);
    for (const auto& path : o_.text_inputs) read_text_path(path);
    for (const auto& path : o_.llmc_inputs) read_llmc(path);
    if (writer_->num_documents() == 0) {
      // Name the inputs: the user must know which files held nothing usable.
      std::string inputs;
      for (const auto* list : {&o_.jsonl_inputs, &o_.text_inputs, &o_.llmc_inputs})
        for (const auto& path : *list) inputs += (inputs.empty() ? "" : ", ") + path;
      throw UsageError("data-prep: no valid document in the input (" + inputs + ")" +
                       std::string(reject_count_ ? " (" + std::to_string(reject_count_) + " rejected)" : ""));
    }
    writer_->set_string_attribute(kDataPrepAttribute, transformation_json().dump());
    DatasetHeader h = writer_->finish();
    if (rejects_.is_open()) {
      rejects_.close();
      if (!rejects_) throw IoError("cannot write the rejects file " + *o_.skip_bad);
    }
    double seconds = elapsed_.seconds();
    double mb = double(input_bytes_) / 1e6;
    if (o_.progress_interval_s > 0)
      log_line("data-prep: done: " + std::to_string(h.num_documents) + " documents, " +
               std::to_string(h.num_tokens) + " tokens, " + std::to_string(reject_count_) +
               " rejected, " + fmt_mb(input_bytes_) + " in " + fmt1(seconds) + " s (" +
               fmt1(mb / std::max(seconds, 1e-9)) + " MB/s)");
    DataPrepResult r;
    r.output = o_.output;
    r.documents = h.num_documents;
    r.tokens = h.num_tokens;
    r.owners = writer_->num_owners();
    r.vocab = h.vocab;
    r.tokenizer = h.tokenizer;
    r.separator_token = h.separator_token;
    r.token_bits = h.token_bits;
    r.event_time_min = event_range_.min();
    r.event_time_max = event_range_.max();
    r.available_time_min = avail_range_.min();
    r.available_time_max = avail_range_.max();
    r.snapshot_id = h.snapshot_id;
    r.rejects = reject_count_;
    r.rejects_file = o_.skip_bad;
    r.rejects_by_class = reject_classes_;
    r.available_by = o_.available_by;
    r.not_yet_available = not_yet_available_;
    for (const auto& src : sources_) r.sources.push_back({src.path, src.sha256_hex, src.bytes});
    r.input_bytes = input_bytes_;
    r.seconds = seconds;
    r.mb_per_s = mb / std::max(seconds, 1e-9);
    r.code_version = code_version();
    return r;
  }

 private:
  // The transformation state kept in the dataset (data_prep.hpp, kDataPrepAttribute).
  nlohmann::json transformation_json() const {
    const auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    return {{"code_version", code_version()},
            {"options",
             {{"jsonl_inputs", o_.jsonl_inputs},
              {"text_inputs", o_.text_inputs},
              {"llmc_inputs", o_.llmc_inputs},
              {"text_owner", opt(o_.text.owner)},
              {"text_event_time", opt(o_.text.event_time)},
              {"text_available_time", opt(o_.text.available_time)},
              {"text_version", o_.text.version},
              {"vocab", vocab_},
              {"tokenizer", tokenizer_},
              {"separator", separator_},
              {"skip_bad", opt(o_.skip_bad)},
              {"available_by", opt(o_.available_by)}}},
            {"rejects", reject_count_}};
  }

  static std::string fmt1(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
  }
  static std::string fmt_mb(uint64_t bytes) { return fmt1(double(bytes) / 1e6) + " MB"; }

  void progress(const LineReader& r, const std::string& path) {
    if (o_.progress_interval_s <= 0) return;
    if (since_progress_.seconds() < o_.progress_interval_s) return;
    since_progress_.restart();
    double elapsed = elapsed_.seconds();
    std::string of = r.size() ? " / " + fmt_mb(*r.size()) + " (" +
                                    fmt1(100.0 * double(r.bytes_read()) / double(std::max<uint64_t>(*r.size(), 1))) + "%)"
                              : "";
    log_line("data-prep: " + path + " " + fmt_mb(r.bytes_read()) + of + ", " +
             std::to_string(writer_->num_documents()) + " documents, " + std::to_string(reject_count_) +
             " rejected, " + fmt1(double(input_bytes_ + r.bytes_read()) / 1e6 / std::max(elapsed, 1e-9)) +
             " MB/s");
  }

  void handle_reject(const std::string& path, uint64_t line_no, std::string_view line, const Reject& r) {
    if (!o_.skip_bad) throw UsageError(path + ":" + std::to_string(line_no) + ": " + r.reason);
    ++reject_count_;
    ++reject_classes_[r.cls];
    nlohmann::json j = {{"file", path}, {"line", line_no}, {"class", r.cls}, {"reason", r.reason},
                        {"input", std::string(line)}};
    rejects_ << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }

  void read_jsonl(const std::string& path) {
    LineReader reader(path);
    std::string_view line;
    uint64_t line_no = 0;
    std::vector<uint32_t> tokens;
    while (reader.next(line)) {
      ++line_no;
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      try {
        accept_jsonl_line(line, tokens);
      } catch (const RejectError& e) {
        handle_reject(path, line_no, line, e.reject);
      }
      if ((line_no & 1023) == 0) progress(reader, path);
    }
    input_bytes_ += reader.bytes_read();
    SourceRecord s = reader.source();
    writer_->add_source(s);
    sources_.push_back(s);
  }

  static const nlohmann::json& field(const nlohmann::json& obj, const char* name) {
    auto it = obj.find(name);
    if (it == obj.end()) reject("missing_field", std::string("missing field '") + name + "'");
    return *it;
  }
  static std::string string_field(const nlohmann::json& obj, const char* name) {
    const auto& v = field(obj, name);
    if (!v.is_string())
      reject("mistyped_field", std::string("field '") + name + "' must be a string, got " + json_type_name(v));
    const auto& s = v.get_ref<const std::string&>();
    if (s.empty()) reject("mistyped_field", std::string("field '") + name + "' must not be empty");
    return s;
  }
  static int64_t time_field(const nlohmann::json& obj, const char* name) {
    std::string s = string_field(obj, name);
    std::string why;
    auto t = try_parse_rfc3339(s, &why);
    if (!t) reject("bad_time", std::string("field '") + name + "': '" + s + "' is not an RFC 3339 date-time (" + why + ")");
    return *t;
  }

  void accept_jsonl_line(std::string_view line, std::vector<uint32_t>& tokens) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line.begin(), line.end());
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range 406 (a number past double)
      std::string what = e.what();
      auto pos = what.find("] ");
      reject("malformed_json", "malformed JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
    }
    if (!j.is_object()) reject("malformed_json", std::string("malformed: expected a JSON object, got ") + json_type_name(j));
    std::string id = string_field(j, "id");
    const auto& version_v = field(j, "version");
    if (!version_v.is_number_integer() ||
        (version_v.is_number_unsigned() && version_v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())))
      reject("mistyped_field", std::string("field 'version' must be an integer, got ") +
                                   (version_v.is_number() ? "a non-integer number" : json_type_name(version_v)));
    int64_t version = version_v.get<int64_t>();
    std::string owner = string_field(j, "owner");
    int64_t event = time_field(j, "event_time");
    int64_t avail = time_field(j, "available_time");
    if (avail < event)
      reject("available_before_event", "available_time " + format_rfc3339(avail) + " is before event_time " +
                                           format_rfc3339(event));
    if (available_by_ && avail > *available_by_) {  // not arrived yet in this snapshot: left out, not rejected
      ++not_yet_available_;
      return;
    }
    auto text_it = j.find("text"), tokens_it = j.find("tokens");
    bool has_text = text_it != j.end(), has_tokens = tokens_it != j.end();
    if (has_text == has_tokens)
      reject(has_text ? "mistyped_field" : "missing_field",
             has_text ? "give either 'text' or 'tokens', not both" : "missing field 'text' (or 'tokens')");
    if (has_text) {
      if (!text_it->is_string())
        reject("mistyped_field", std::string("field 'text' must be a string, got ") + json_type_name(*text_it));
      if (!bytes_ok_)
        reject("mistyped_field", "field 'text' needs the bytes tokenizer (vocab 256); this dataset has vocab " +
                                     std::to_string(vocab_) + " (" + tokenizer_ + "): give 'tokens'");
      const auto& text = text_it->get_ref<const std::string&>();
      auto nul = text.find('\0');
      if (nul != std::string::npos)
        reject("separator_in_document", "text contains a NUL byte at byte " + std::to_string(nul) +
                                            " (byte 0 is the document separator)");
      check_duplicate(id, version);
      writer_->add_document(id, version, event, avail, owner,
                            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    } else {
      if (!tokens_it->is_array())
        reject("mistyped_field", std::string("field 'tokens' must be an array of integers, got ") +
                                     json_type_name(*tokens_it));
      tokens.clear();
      tokens.reserve(tokens_it->size());
      std::size_t k = 0;
      for (const auto& t : *tokens_it) {
        if (!t.is_number_integer())
          reject("mistyped_field", "field 'tokens' element " + std::to_string(k) + " must be an integer, got " +
                                       json_type_name(t));
        bool in_vocab = t.is_number_unsigned() ? t.get<uint64_t>() < uint64_t(vocab_)
                                               : (t.get<int64_t>() >= 0 && t.get<int64_t>() < vocab_);
        if (!in_vocab)
          reject("token_out_of_vocab", "token " + t.dump() + " at index " + std::to_string(k) +
                                           " is outside the vocab [0, " + std::to_string(vocab_) + ")");
        uint32_t v = uint32_t(t.get<uint64_t>());
        if (v == uint64_t(separator_))
          reject("separator_in_document", "token at index " + std::to_string(k) + " is the separator token " +
                                              std::to_string(separator_));
        tokens.push_back(v);
        ++k;
      }
      check_duplicate(id, version);
      writer_->add_document(id, version, event, avail, owner, std::span<const uint32_t>(tokens));
    }
    event_range_.add(event);
    avail_range_.add(avail);
  }

  void check_duplicate(const std::string& id, int64_t version) {
    if (!seen_.insert(key_hash(id, version)).second)
      reject("duplicate_id_version", "repeated (id, version) = (\"" + id + "\", " + std::to_string(version) + ")");
  }

  void read_text_path(const std::string& root) {
    std::error_code ec;
    if (!fs::exists(root, ec)) throw IoError("--text " + root + ": no such file or folder");
    if (!fs::is_directory(root, ec)) {
      read_text_file(root, root);
      return;
    }
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) files.push_back(it->path());
    }
    if (ec) throw IoError("--text " + root + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) read_text_file(f.string(), fs::relative(f, root).string());
  }

  // The --text / --llmc document times of the file at `path`.
  std::pair<int64_t, int64_t> file_times(const std::string& path) const {
    int64_t event;
    if (o_.text.event_time) {
      event = parse_rfc3339(*o_.text.event_time, "--event-time");
    } else {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) throw IoError("cannot stat " + path);
      event = int64_t(st.st_mtime);
    }
    return {event, o_.text.available_time ? parse_rfc3339(*o_.text.available_time, "--available-time") : event};
  }

  void read_llmc(const std::string& path) {
    // Plain variables, not a structured binding: the lambda below captures them (clang 14, the fuzz
    // and sanitizer builds' compiler, cannot capture a binding).
    const auto times = file_times(path);
    const int64_t event = times.first, avail = times.second;
    const std::string owner = o_.text.owner.value_or(fs::path(path).filename().string());
    std::uint64_t k = 0;
    const LlmcShardInfo info = read_llmc_shard(path, uint32_t(separator_), [&](const std::vector<uint32_t>& tokens) {
      const std::string id = path + ":" + std::to_string(k++);
      try {
        if (avail < event)
          reject("available_before_event", "available_time " + format_rfc3339(avail) + " is before event_time " +
                                               format_rfc3339(event));
        for (std::size_t i = 0; i < tokens.size(); ++i)
          if (int64_t(tokens[i]) >= vocab_)
            reject("token_out_of_vocab", "document " + id + ": token " + std::to_string(tokens[i]) + " at index " +
                                             std::to_string(i) + " is outside the vocab [0, " + std::to_string(vocab_) + ")");
        check_duplicate(id, o_.text.version);
        writer_->add_document(id, o_.text.version, event, avail, owner, std::span<const uint32_t>(tokens));
        event_range_.add(event);
        avail_range_.add(avail);
      } catch (const RejectError& e) {
        handle_reject(path, k, "", e.reject);
      }
    });
    input_bytes_ += info.bytes;
    const SourceRecord src{path, info.sha256_hex, info.bytes};
    writer_->add_source(src);
    sources_.push_back(src);
  }

  void read_text_file(const std::string& path, const std::string& id) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError("cannot open " + path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw IoError("cannot read " + path);
    SourceRecord src{path, to_hex(sha256(text.data(), text.size())), text.size()};
    input_bytes_ += text.size();
    const auto [event, avail] = file_times(path);
    std::string owner = o_.text.owner.value_or(fs::path(path).filename().string());
    try {
      if (avail < event)
        reject("available_before_event", "available_time " + format_rfc3339(avail) + " is before event_time " +
                                             format_rfc3339(event));
      auto nul = text.find('\0');
      if (nul != std::string::npos)
        reject("separator_in_document", "text contains a NUL byte at byte " + std::to_string(nul) +
                                            " (byte 0 is the document separator)");
      check_duplicate(id, o_.text.version);
      writer_->add_document(id, o_.text.version, event, avail, owner,
                            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
      event_range_.add(event);
      avail_range_.add(avail);
    } catch (const RejectError& e) {
      auto nul = text.find('\0');
      uint64_t line = 1 + uint64_t(std::count(text.begin(), text.begin() + (nul == std::string::npos ? 0 : nul), '\n'));
      handle_reject(path, line, "", e.reject);
    }
    writer_->add_source(src);
    sources_.push_back(src);
  }

  const DataPrepOptions& o_;
  int64_t vocab_ = kByteVocab, separator_ = kByteSeparator;
  std::string tokenizer_;
  bool bytes_ok_ = true;
  std::unique_ptr<DatasetWriter> writer_;
  std::ofstream rejects_;
  uint64_t reject_count_ = 0;
  uint64_t not_yet_available_ = 0;
  std::optional<int64_t> available_by_;  // unix seconds of --available-by
  std::map<std::string, uint64_t> reject_classes_;
  std::unordered_set<uint64_t> seen_;
  std::vector<SourceRecord> sources_;
  TimeRange event_range_, avail_range_;
  uint64_t input_bytes_ = 0;
  Stopwatch elapsed_, since_progress_;  // the whole run; since the last progress line
};
}  // namespace

DataPrepResult run_data_prep(const DataPrepOptions& options) {
  Prep prep(options);
  return prep.run();
}

nlohmann::json DataPrepResult::to_json() const { return json_fields::write(*this); }

DataPrepResult DataPrepResult::from_json(const JsonFile& f) { return json_fields::read<DataPrepResult>(f, ""); }

}  // namespace shardtrain::data
