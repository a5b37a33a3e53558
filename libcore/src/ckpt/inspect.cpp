#include "shardtrain/ckpt/inspect.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#include "internal.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/ckpt/commit.hpp"
#include "shardtrain/ckpt/consolidated.hpp"

namespace fs = std::filesystem;

namespace shardtrain::ckpt {
namespace {

// The step folder to inspect for a checkpoint directory: the one `latest` names, else the newest.
std::string step_folder_of(const std::string& path) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / kIndexFile, ec)) return path;
  std::string name;
  try {
    name = read_latest(path);
  } catch (const std::exception&) {
  }
  if (name.empty() || !fs::is_directory(fs::path(path) / name, ec)) {
    const auto all = list_checkpoints(path);
    if (all.empty())
      throw UsageError(path + ": neither a checkpoint (no index.h5) nor a checkpoint directory (no step_<N> "
                       "folders); pass a step_<N> folder, a --ckpt-dir or a consolidated file");
    name = all.front();
  }
  return (fs::path(path) / name).string();
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string layout_text(const CheckpointLayout& l) {
  return "world " + std::to_string(l.world_size) + ", dp " + std::to_string(l.dp) + ", tp " + std::to_string(l.tp) +
         ", " + (l.zero_stage == 0 ? std::string("DDP") : "ZeRO-" + std::to_string(l.zero_stage));
}

// Every rank file's verdict (check_rank_files) with its record; the first bad one into `problem`.
nlohmann::json check_files(const std::string& folder, const CheckpointManifest& m, std::string& problem) {
  nlohmann::json files = nlohmann::json::array();
  const auto verdicts = check_rank_files(folder, m);
  for (std::size_t i = 0; i < m.files.size(); ++i) {
    const auto& f = m.files[i];
    if (verdicts[i] != "OK" && problem.empty()) problem = (fs::path(folder) / f.name).string() + ": " + verdicts[i];
    files.push_back({{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}, {"sha256", f.sha256}, {"verdict", verdicts[i]}});
  }
  return files;
}

// The checkpoint's tensors, opened without hashing (structure, sizes, coverage: every file is
// hashed by check_files, so that every bad one is named, not only the first); null with `problem`
// set when it cannot be opened.
std::unique_ptr<TensorSource> open_unverified(const std::string& path, bool consolidated, std::string& problem) {
  try {
    if (consolidated) return std::make_unique<ConsolidatedReader>(path);
    ReadOptions ro;
    ro.verify_files = false;
    return std::make_unique<CheckpointReader>(path, ro);
  } catch (const std::exception& e) {
    problem = e.what();
    return nullptr;
  }
}

// One record per tensor, its verdict "unchecked".
nlohmann::json tensor_records(const TensorSource& source) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : source.tensors())
    tensors.push_back({{"name", t.spec.name}, {"dtype", dtype_name(t.spec.dtype)}, {"shape", t.spec.shape},
                       {"bytes", t.spec.bytes()}, {"checksum", format_checksum(t.checksum)}, {"verdict", "unchecked"}});
  return tensors;
}

// Reads every tensor back and checks its sum64 against the recorded one: each record's verdict,
// the first bad one into `problem`.
void verify_tensors(TensorSource& source, const std::string& path, nlohmann::json& tensors, std::string& problem) {
  std::vector<char> buffer;
  std::size_t i = 0;
  for (const auto& t : source.tensors()) {
    buffer.resize(std::size_t(t.spec.bytes()));
    std::string verdict = "OK";
    try {
      source.read_range(t.spec.name, 0, t.spec.numel(), buffer.data());
      const std::uint64_t got = piece_checksum(buffer.data(), t.spec.numel(), t.spec.dtype, 0);
      if (got != t.checksum) verdict = "checksum " + format_checksum(got) + " differs from the recorded one";
    } catch (const std::exception& e) {
      verdict = e.what();
    }
    if (verdict != "OK" && problem.empty()) problem = path + ": tensor '" + t.spec.name + "': " + verdict;
    tensors[i++]["verdict"] = verdict;
  }
}

// The human-readable form of the report `j`: a key column, then the tensors and files as tables.
class InspectionText {
 public:
  void kv(const char* key, const std::string& value) {
    t_ << key << std::string(14 - std::min<std::size_t>(13, std::strlen(key)), ' ') << value << "\n";
  }
  void manifest(const CheckpointManifest& m) {
    kv("step", std::to_string(m.step) + " (tokens seen " + std::to_string(m.tokens_seen) + ")");
    kv("layout", layout_text(m.layout) + ", " + std::to_string(m.writers) + " rank file" + (m.writers == 1 ? "" : "s"));
    kv("model", m.model.dump());
    kv("batch", "global " + std::to_string(m.global_batch) + " = micro " + std::to_string(m.micro_batch) + " x accum " +
                    std::to_string(m.grad_accum) + " x dp " + std::to_string(m.layout.dp));
    kv("sampler", "epoch " + std::to_string(m.sampler_epoch) + ", consumed " + std::to_string(m.sampler_consumed));
    std::snprintf(line_, sizeof line_, "step %lld, lr %.6g", static_cast<long long>(m.lr_step), m.lr);
    kv("lr schedule", line_);
    kv("data", "snapshot " + (m.data_snapshot_id.empty() ? std::string("(none)") : m.data_snapshot_id) + ", cutoff " +
                   (m.data_cutoff.empty() ? std::string("(none)") : m.data_cutoff));
    kv("written", m.created + " by " + m.code_version);
    if (m.history.empty()) kv("history", "(none: as the trainer wrote it)");
    for (const auto& h : m.history) {
      CheckpointLayout l;
      l.world_size = h.value(nlohmann::json::json_pointer("/layout/world_size"), 0);
      l.dp = h.value(nlohmann::json::json_pointer("/layout/dp"), 0);
      l.tp = h.value(nlohmann::json::json_pointer("/layout/tp"), 0);
      l.zero_stage = h.value(nlohmann::json::json_pointer("/layout/zero_stage"), 0);
      kv("history", h.value("operation", "?") + " from " + h.value("source", "?") + " (" + layout_text(l) + ", " +
                        std::to_string(h.value("writers", 0)) + " rank files)");
    }
  }
  void tensors(const nlohmann::json& j) {
    std::snprintf(line_, sizeof line_, "%zu (%lld parameters; %.1f MB with the optimizer moments)", j["tensors"].size(),
                  static_cast<long long>(j["parameters"].get<std::int64_t>()),
                  double(j["tensor_bytes"].get<std::int64_t>()) / 1e6);
    kv("tensors", line_);
    for (const auto& x : j["tensors"]) {
      std::snprintf(line_, sizeof line_, "  %-36s %-8s %-16s %12lld  %s\n", x["name"].get<std::string>().c_str(),
                    x["dtype"].get<std::string>().c_str(), shape_text(x["shape"].get<std::vector<std::int64_t>>()).c_str(),
                    static_cast<long long>(x["bytes"].get<std::int64_t>()), x["verdict"].get<std::string>().c_str());
      t_ << line_;
    }
    if (!j.contains("files")) return;
    kv("files", std::to_string(j["files"].size()));
    for (const auto& f : j["files"]) {
      std::snprintf(line_, sizeof line_, "  %-16s %14lld bytes  %s\n", f["name"].get<std::string>().c_str(),
                    static_cast<long long>(f["bytes"].get<std::int64_t>()), f["verdict"].get<std::string>().c_str());
      t_ << line_;
    }
  }
  void verdict(const Inspection& out) {
    t_ << "verdict: " << (out.valid ? "OK (every file and tensor checksum verified)" : "CORRUPT: " + out.problem) << "\n";
  }
  std::string str() const { return t_.str(); }

 private:
  std::ostringstream t_;
  char line_[512];
};

}  // namespace

Inspection inspect_checkpoint(const std::string& path_in) {
  detail::quiet_hdf5();
  std::error_code ec;
  if (!fs::exists(path_in, ec)) throw UsageError(path_in + ": no such checkpoint folder or file");
  const bool consolidated = !fs::is_directory(path_in, ec);
  const std::string path = consolidated ? path_in : step_folder_of(path_in);
  Inspection out;
  nlohmann::json& j = out.report;
  j["path"] = path;
  j["kind"] = consolidated ? "consolidated" : "checkpoint";

  const std::unique_ptr<TensorSource> source = open_unverified(path, consolidated, out.problem);
  nlohmann::json tensors = nlohmann::json::array();
  std::int64_t tensor_bytes = 0, parameters = 0;
  if (source) {
    const CheckpointManifest& m = source->manifest();
    j["manifest"] = m.to_json();
    if (!consolidated) j["files"] = check_files(path, m, out.problem);
    for (const auto& t : source->tensors()) {
      tensor_bytes += t.spec.bytes();
      if (t.spec.name.rfind("optim.", 0) != 0) parameters += t.spec.numel();
    }
    tensors = tensor_records(*source);
    if (out.problem.empty()) verify_tensors(*source, path, tensors, out.problem);  // files intact
  }
  j["tensors"] = tensors;
  j["tensor_bytes"] = tensor_bytes;
  j["parameters"] = parameters;
  out.valid = out.problem.empty();
  j["verdict"] = out.valid ? "OK" : "CORRUPT";
  j["problem"] = out.problem;

  InspectionText text;
  text.kv("path", path + (consolidated ? " (consolidated file)" : ""));
  if (source) {
    text.manifest(source->manifest());
    text.tensors(j);
  }
  text.verdict(out);
  out.text = text.str();
  return out;
}

}  // namespace shardtrain::ckpt
