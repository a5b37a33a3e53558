#include "shardtrain/ckpt/commit.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "shardtrain/comm/string_collectives.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"

namespace fs = std::filesystem;

namespace shardtrain::ckpt {

std::string read_latest(const std::string& ckpt_dir) {
  const fs::path p = fs::path(ckpt_dir) / kLatestFile;
  std::error_code ec;
  if (!fs::exists(p, ec)) return "";
  std::ifstream in(p);
  if (!in) throw IoError(p.string() + ": cannot read");
  std::string name;
  std::getline(in, name);
  while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return name;
}

void write_latest(const std::string& ckpt_dir, const std::string& folder_name) {
  write_file_atomically((fs::path(ckpt_dir) / kLatestFile).string(), folder_name + "\n");
}

std::vector<std::string> list_checkpoints(const std::string& ckpt_dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::int64_t step = parse_step_folder_name(name);
    if (step >= 0 && e.is_directory(ec)) found.emplace_back(step, name);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

namespace {
std::vector<std::string> leftovers(const std::string& ckpt_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    const std::string name = e.path().filename().string();
    for (const char* suffix : {".tmp", ".deleting", ".replaced"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          parse_step_folder_name(name.substr(0, name.size() - s.size())) >= 0)
        out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The choice of find_resume_checkpoint (and so the folder prune_checkpoints keeps): the folder
// `latest` names if it is a valid checkpoint, else the newest valid committed step folder; nullopt
// when none is valid. Logs nothing itself: each skipped candidate, the choice or the lack of one go
// to `note` (when given) as the log lines of find_resume_checkpoint, as they happen.
// `validate` judges one candidate ("" valid, else why not); validate_checkpoint by default.
using Validator = std::function<std::string(const std::string& path)>;
std::optional<std::string> pick_checkpoint(const std::string& ckpt_dir, const ReadOptions& options,
                                           const std::function<void(const std::string&)>& note = {},
                                           const Validator& validate = {}) {
  auto say = [&](const std::string& line) {
    if (note) note(line);
  };
  std::set<std::string> tried;
  auto try_folder = [&](const std::string& name, const char* why) -> bool {
    tried.insert(name);
    const std::string path = (fs::path(ckpt_dir) / name).string();
    const std::string error = validate ? validate(path) : validate_checkpoint(path, options);
    if (error.empty()) {
      say("resume: using checkpoint " + path + " (" + why + ")");
      return true;
    }
    say("resume: SKIPPING corrupt or incompatible checkpoint " + path + ": " + error);
    return false;
  };

  std::string latest;
  try {
    latest = read_latest(ckpt_dir);
  } catch (const Error& e) {
    say(std::string("resume: ") + e.what() + "; scanning the step folders instead");
  }
  const auto all = list_checkpoints(ckpt_dir);
  if (!latest.empty()) {
    const fs::path latest_path = fs::path(ckpt_dir) / kLatestFile;
    std::error_code ec;
    if (parse_step_folder_name(latest) < 0) {
      say("resume: " + latest_path.string() + " holds '" + latest +
          "', not a step_<8 digits> folder name; scanning the step folders instead");
    } else if (!fs::is_directory(fs::path(ckpt_dir) / latest, ec)) {
      say("resume: " + latest_path.string() + " points to " + (fs::path(ckpt_dir) / latest).string() +
          ", which does not exist; scanning the step folders instead");
    } else if (try_folder(latest, "named by latest")) {
      return latest;
    }
  }
  for (const auto& name : all) {
    if (tried.count(name)) continue;
    if (try_folder(name, "newest valid step folder")) return name;
  }
  if (all.empty())
    say("resume: no committed checkpoint in " + ckpt_dir + ": starting fresh");
  else
    say("resume: none of the " + std::to_string(all.size()) + " checkpoints in " + ckpt_dir +
        " is valid (see the lines above): starting fresh");
  return std::nullopt;
}

// find_resume_checkpoint with each candidate judged by `validate` (validate_checkpoint when empty).
std::optional<std::string> find_resume_checkpoint_with(const std::string& ckpt_dir, const ReadOptions& options,
                                                       const Validator& validate) {
  std::error_code ec;
  if (!fs::exists(ckpt_dir, ec)) {
    log_line("resume: no checkpoint folder " + ckpt_dir + " yet: starting fresh");
    return std::nullopt;
  }
  if (!fs::is_directory(ckpt_dir, ec))
    throw UsageError(ckpt_dir + ": checkpoint path exists and is not a folder; pass a folder to --ckpt-dir");
  for (const auto& name : leftovers(ckpt_dir))
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0)
      log_line("resume: ignoring " + (fs::path(ckpt_dir) / name).string() +
               ": an interrupted save (never committed); it is removed at the next save or prune");
  const auto name = pick_checkpoint(ckpt_dir, options, log_line, validate);
  if (!name) return std::nullopt;
  return (fs::path(ckpt_dir) / *name).string();
}

// The first error of `reports` in rank order (each "-<error>" or "+<payload>"); "" when none.
std::string first_error(const std::vector<std::string>& reports) {
  for (const auto& r : reports)
    if (r.rfind("-", 0) == 0) return r.substr(1);
  return "";
}

using Restore = std::function<void(const CheckpointReader&)>;

// One candidate judged by every rank of `comm` at once, each its share of the hashing and the piece
// sums (ReadOptions::share); the shares' sums are added up and checked on every rank. With
// `restore`, the share's hashing is done while `restore` reads (hash_while_reading) and the ranks
// agree once more after it. Returns, the same on every rank, "" when the candidate is valid (and
// restored), else the first rank's error in rank order.
std::string validate_together(const std::string& path, const ReadOptions& options, Communicator& comm,
                              const Restore& restore = {}) {
  ReadOptions mine = options;
  mine.share = {comm.rank(), comm.size()};
  mine.hash_while_reading = bool(restore);
  std::optional<CheckpointReader> reader;
  std::string report;  // "+" and the share's sums as 16 hex digits each, or "-" and the error
  try {
    reader.emplace(path, mine);
    report = "+";
    char hex[17];
    for (const std::uint64_t sum : reader->share_piece_sums()) {
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(sum));
      report += hex;
    }
  } catch (const std::exception& e) {
    report = "-" + std::string(e.what());
  }
  const std::vector<std::string> reports = all_gather_strings(report, comm);
  if (std::string error = first_error(reports); !error.empty()) return error;
  std::vector<std::uint64_t> totals(reader->share_piece_sums().size(), 0);
  for (const auto& r : reports) {
    if (r.size() != 1 + 16 * totals.size())
      return path + ": the ranks read different tensor tables (the checkpoint changed under them)";
    for (std::size_t i = 0; i < totals.size(); ++i) totals[i] += std::stoull(r.substr(1 + 16 * i, 16), nullptr, 16);
  }
  try {
    if (reader->piece_sums_owed()) reader->check_piece_sums(totals);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (!restore) return "";
  try {
    restore(*reader);
    reader->verify_pending_files();
    report = "+";
  } catch (const std::exception& e) {
    report = "-" + std::string(e.what());
  }
  return first_error(all_gather_strings(report, comm));
}

// find_resume_checkpoint_collective's protocol, each candidate judged by validate_together with
// `restore` (none: validation only). Rank 0 walks the candidates (its view of the folder decides
// their order) and sends each one as "?<path>" before judging it with the others; then its answer:
// "-" = none, "+<path>" = found, else an encoded error (any failure is a UsageError). The other
// ranks judge what they are sent.
std::optional<std::string> walk_candidates_together(const std::string& ckpt_dir, Communicator& comm,
                                                    const ReadOptions& options, bool together, const Restore& restore) {
  std::string answer;
  if (comm.rank() == 0) {
    const Validator judge = [&](const std::string& path) {
      std::string ask = "?" + path;
      broadcast_string(ask, comm);
      return validate_together(path, options, comm, restore);
    };
    try {
      auto found = find_resume_checkpoint_with(ckpt_dir, options, together ? judge : Validator());
      answer = found ? "+" + *found : "-";
    } catch (const std::exception& e) {
      answer = encode_error(UsageError(e.what()));
    }
    broadcast_string(answer, comm);
  } else {
    for (;;) {
      broadcast_string(answer, comm);
      if (answer.rfind("?", 0) != 0) break;
      validate_together(answer.substr(1), options, comm, restore);
    }
  }
  if (answer == "-") return std::nullopt;
  if (answer.rfind("+", 0) != 0) throw_encoded(answer);
  return answer.substr(1);
}

}  // namespace

std::optional<std::string> find_resume_checkpoint(const std::string& ckpt_dir, const ReadOptions& options) {
  return find_resume_checkpoint_with(ckpt_dir, options, {});
}

std::optional<std::string> find_resume_checkpoint_collective(const std::string& ckpt_dir, Communicator& comm,
                                                             const ReadOptions& options) {
  return walk_candidates_together(ckpt_dir, comm, options, options.verify_files && comm.size() > 1, {});
}

CollectiveRestore restore_resume_checkpoint_collective(const std::string& ckpt_dir, Communicator& comm,
                                                       const ReadOptions& options, const Restore& restore) {
  if (!options.verify_files)
    throw UsageError("restore_resume_checkpoint_collective: options.verify_files is off; a resume validates what it restores");
  // Called on every rank or on none (validate_together calls it after the ranks agreed on the open).
  int restores = 0;
  const Restore counted = [&](const CheckpointReader& reader) {
    ++restores;
    restore(reader);
  };
  CollectiveRestore result;
  result.folder = walk_candidates_together(ckpt_dir, comm, options, true, counted);
  result.restored_then_refused = restores > (result.folder ? 1 : 0);
  return result;
}

std::vector<std::string> prune_checkpoints(const std::string& ckpt_dir, int keep, const std::string& known_valid,
                                           const ReadOptions& options) {
  if (keep < 1)
    throw UsageError("prune: keep " + std::to_string(keep) + " is less than 1; keep at least one checkpoint");
  std::vector<std::string> removed;
  auto remove_folder = [&](const std::string& name) {
    const fs::path from = fs::path(ckpt_dir) / name;
    fs::path doomed = from;
    std::error_code ec;
    if (parse_step_folder_name(name) >= 0) {
      doomed = fs::path(ckpt_dir) / (name + ".deleting");
      fs::rename(from, doomed, ec);
      if (ec) {
        log_line("prune: cannot rename " + from.string() + " for removal: " + ec.message());
        return;
      }
    }
    fs::remove_all(doomed, ec);
    if (ec) log_line("prune: cannot remove " + doomed.string() + ": " + ec.message());
    removed.push_back(name);
  };
  for (const auto& name : leftovers(ckpt_dir)) remove_folder(name);

  const auto all = list_checkpoints(ckpt_dir);
  if (int(all.size()) <= keep) return removed;
  // The checkpoint a resume would pick is never removed.
  std::string protect = known_valid;
  if (protect.empty()) protect = pick_checkpoint(ckpt_dir, options).value_or("");
  for (std::size_t i = std::size_t(keep); i < all.size(); ++i) {
    if (all[i] == protect) {
      log_line("prune: keeping " + (fs::path(ckpt_dir) / all[i]).string() +
               " beyond --keep " + std::to_string(keep) + ": it is the newest valid checkpoint");
      continue;
    }
    remove_folder(all[i]);
  }
  if (!removed.empty()) {
    try {
      fsync_path(ckpt_dir);
    } catch (const Error&) {
    }
  }
  return removed;
}

}  // namespace shardtrain::ckpt
