#include "shardtrain/deviceproof/gpu_check_results.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "deviceproof/text_file.hpp"

namespace fs = std::filesystem;

namespace shardtrain::deviceproof {

const char* status_name(StageStatus s) {
  for (const auto& [name, status] : kStageStatusNames)
    if (status == s) return name;
  return "fail";
}

nlohmann::json summary_json(const std::vector<StageRecord>& stages, bool dry, const std::string& bundle) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : stages)
    list.push_back(json_fields::write_fields(s, StageRecord::summary_fields()));
  return {{"stages", list}, {"dry_run", dry}, {"bundle", bundle.empty() ? nlohmann::json(nullptr) : nlohmann::json(bundle)}};
}

namespace {

// The value of attribute `name` in an XML start tag's text (entities left as they are: Catch2's
// case names are ours).
std::string attribute(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const auto at = tag.find(key);
  if (at == std::string::npos) return "";
  const auto from = at + key.size();
  return tag.substr(from, tag.find('"', from) - from);
}

double relative(double value, double reference) { return std::abs(value - reference) / std::abs(reference); }

}  // namespace

nlohmann::json junit_cases(const std::string& xml) {
  // Catch2's JUnit reporter writes <testcase .../> or <testcase ...> ... </testcase>; a case failed
  // when a <failure> or <error> sits inside it. That shape is all this reads.
  nlohmann::json cases = nlohmann::json::array();
  for (std::size_t at = xml.find("<testcase"); at != std::string::npos; at = xml.find("<testcase", at + 1)) {
    const auto tag_end = xml.find('>', at);
    if (tag_end == std::string::npos) break;
    const std::string tag = xml.substr(at, tag_end - at);
    bool failed = false;
    if (tag.empty() || tag.back() != '/') {
      auto close = xml.find("</testcase>", tag_end);
      if (close == std::string::npos) close = xml.size();
      const std::string body = xml.substr(tag_end, close - tag_end);
      failed = body.find("<failure") != std::string::npos || body.find("<error") != std::string::npos;
    }
    cases.push_back({{"name", attribute(tag, "name")}, {"failed", failed}});
  }
  return cases;
}

StageResult gpu_tests_result(const std::string& junit_path, int gpu_rc, int nccl_rc, bool dry) {
  StageResult r;
  r.result = {{"exit_code", gpu_rc}, {"nccl_exit_code", nccl_rc}, {"skipped_no_device", gpu_rc == 77}};
  if (fs::exists(junit_path) && fs::file_size(junit_path) > 0) r.result["cases"] = junit_cases(read_text(junit_path));
  if (nccl_rc != 0) r.failure = "shardtrain_tests [nccl] exited " + std::to_string(nccl_rc);
  else if (dry && gpu_rc != 77)
    r.failure = "shardtrain_tests [gpu] exited " + std::to_string(gpu_rc) + ", not 77 (skipped: no device)";
  else if (!dry && gpu_rc != 0) r.failure = "shardtrain_tests [gpu] exited " + std::to_string(gpu_rc);
  return r;
}

StageResult equivalence_result(const equiv::EquivReport& report, std::optional<equiv::Verdict> expected) {
  StageResult r;
  r.result = report.to_json();
  const std::string got = equiv::verdict_name(report.verdict);
  if (expected && report.verdict != *expected)
    r.failure = "verdict " + got + ", expected " + equiv::verdict_name(*expected);
  else if (report.verdict == equiv::Verdict::kDifferent)
    r.failure = "verdict DIFFERENT: " + report.options.a + " against " + report.options.b;
  return r;
}

StageResult resume_result(const equiv::EquivReport& dev_cpu, const equiv::EquivReport& cpu_dev,
                          const std::string& low_cpu_summary) {
  StageResult r;
  r.result = {{"dev_cpu", equiv::verdict_name(dev_cpu.verdict)},
              {"cpu_dev", equiv::verdict_name(cpu_dev.verdict)},
              {"low_precision_checkpoint_resumed_on_cpu",
               read_run_summary(low_cpu_summary, "the low-precision resume's run summary").final_loss}};
  for (const auto* rep : {&dev_cpu, &cpu_dev})
    if (rep->verdict == equiv::Verdict::kDifferent)
      r.failure += std::string(r.failure.empty() ? "" : "; ") + rep->options.a + " against " + rep->options.b +
                   ": DIFFERENT";
  return r;
}

StageResult bf16_vs_fp32_result(const std::string& runs, int warmup, const std::string& corpus) {
  const auto hi = read_step_log(runs + "/fp32/steps.rank0.jsonl").steps;
  const auto lo = read_step_log(runs + "/low/steps.rank0.jsonl").steps;
  if (hi.empty() || hi.size() != lo.size())
    throw UsageError(runs + ": " + std::to_string(hi.size()) + " fp32 steps, " + std::to_string(lo.size()) +
                     " low-precision steps: expected the same, some");
  std::vector<double> rel;
  for (std::size_t i = 0; i < hi.size(); ++i) rel.push_back(relative(lo[i].record.loss, hi[i].record.loss));
  const std::size_t from = std::size_t(warmup) < rel.size() ? std::size_t(warmup) : 0;  // all, when warm-up is longer
  const auto worst = std::max_element(rel.begin() + std::ptrdiff_t(from), rel.end());
  const double worst_rel = *worst;
  const auto sh = read_run_summary(runs + "/fp32/summary.json", "the fp32 run summary");
  const auto sl = read_run_summary(runs + "/low/summary.json", "the low-precision run summary");
  nlohmann::json holdout = nlohmann::json::array(), holdout_rel = nullptr;
  holdout.push_back(sh.eval ? nlohmann::json(sh.eval->loss) : nlohmann::json(nullptr));
  holdout.push_back(sl.eval ? nlohmann::json(sl.eval->loss) : nlohmann::json(nullptr));
  std::optional<double> ho_rel;
  if (sh.eval && sl.eval && sh.eval->loss != 0 && sl.eval->loss != 0) ho_rel = relative(sl.eval->loss, sh.eval->loss);
  if (ho_rel) holdout_rel = *ho_rel;
  StageResult r;
  r.result = {{"corpus", corpus}, {"steps", hi.size()}, {"warmup", warmup},
              {"precision", {precision_name(sh.precision), precision_name(sl.precision)}},
              {"max_rel_loss_diff_after_warmup", worst_rel},
              {"worst_step", std::int64_t(from) + (worst - (rel.begin() + std::ptrdiff_t(from)))},
              {"holdout_loss", holdout}, {"holdout_rel_diff", holdout_rel},
              {"loss_within_2pct", worst_rel <= 0.02}, {"holdout_within_1pct", ho_rel && *ho_rel <= 0.01},
              {"throughput_tokens_per_s", {sh.throughput_tokens_per_s, sl.throughput_tokens_per_s}}};
  if (!(worst_rel <= 0.02 && ho_rel && *ho_rel <= 0.01)) {
    std::ostringstream why;
    why << "largest loss difference after warm-up " << worst_rel << " (limit 0.02), hold-out "
        << (ho_rel ? std::to_string(*ho_rel) : std::string("none")) << " (limit 0.01)";
    r.failure = why.str();
  }
  return r;
}

StageResult gpt2_result(const std::string& summary_path) {
  const auto s = read_run_summary(summary_path, "the GPT-2 run summary");
  const JsonFile file = JsonFile::parse(s.config.dump(), summary_path, "the GPT-2 run summary's config");
  const double L = file.number("/model/n_layer"), C = file.number("/model/d_model"), T = file.number("/model/seq_len");
  const double flops = 6 * s.parameters + 12 * L * T * C;
  StageResult r;
  r.result = {{"parameters", s.parameters}, {"layers", L}, {"d_model", C}, {"seq_len", T},
              {"vocab", file.number("/model/vocab")}, {"precision", precision_name(s.precision)},
              {"device", s.device_name}, {"tokens_per_s", s.throughput_tokens_per_s},
              {"median_step_s", s.median_step_s}, {"flops_per_token_6N_12LTC", flops},
              {"flops_per_token_trainer", s.flops_per_token}, {"peak_measured_flops", s.peak_flops_per_rank},
              {"peak_datasheet_flops", s.peak_flops_datasheet_per_rank ? nlohmann::json(*s.peak_flops_datasheet_per_rank)
                                                                        : nlohmann::json(nullptr)},
              {"mfu_vs_measured_peak",
               s.peak_flops_per_rank > 0 ? nlohmann::json(s.throughput_tokens_per_s * flops / s.peak_flops_per_rank)
                                         : nlohmann::json(nullptr)},
              {"mfu_vs_datasheet_peak",
               s.peak_flops_datasheet_per_rank && *s.peak_flops_datasheet_per_rank > 0
                   ? nlohmann::json(s.throughput_tokens_per_s * flops / *s.peak_flops_datasheet_per_rank)
                   : nlohmann::json(nullptr)},
              {"target_mfu_vs_datasheet", 0.45}};
  return r;
}

StageResult cpu_scaling_result(const std::string& series, const std::vector<int>& workers, int scale_bench_rc,
                               int cpus) {
  std::vector<std::pair<int, double>> rows;  // workers, tokens/s, in the order given
  for (int w : workers) {
    const std::string p = series + "/w" + std::to_string(w) + "/summary.json";
    if (fs::exists(p)) rows.emplace_back(w, read_run_summary(p, "scale-bench's run summary").throughput_tokens_per_s);
  }
  std::sort(rows.begin(), rows.end());
  std::optional<double> base;
  for (const auto& [w, t] : rows)
    if (!workers.empty() && w == workers.front()) base = t;
  nlohmann::json table = nlohmann::json::array();
  for (const auto& [w, t] : rows) {
    const bool have = base && *base > 0;
    table.push_back({{"workers", w}, {"tokens_per_s", t},
                     {"speedup", have ? nlohmann::json(t / *base) : nlohmann::json(nullptr)},
                     {"efficiency", have ? nlohmann::json(t / (double(w) / workers.front() * *base)) : nlohmann::json(nullptr)},
                     {"oversubscribed", w > cpus}});
  }
  StageResult r;
  const std::string report = series + "/report.json";
  r.result = {{"scale_bench_exit", scale_bench_rc},
              {"report_json", fs::exists(report) ? nlohmann::json(report) : nlohmann::json(nullptr)},
              {"cpus", cpus}, {"table", table}};
  if (rows.size() != workers.size()) {
    std::string got, want;
    for (const auto& row : rows) got += (got.empty() ? "" : ",") + std::to_string(row.first);
    for (int w : workers) want += (want.empty() ? "" : ",") + std::to_string(w);
    r.failure = "points at workers [" + got + "], expected [" + want + "] (scale-bench exit " +
                std::to_string(scale_bench_rc) + ")";
  }
  return r;
}

StageResult build_result(const std::string& configure_log_text) {
  StageResult r;
  const bool cuda = configure_log_text.find("CUDA backend ON") != std::string::npos;
  r.result = {{"built", true}, {"cuda_on", cuda},
              {"nccl_on", configure_log_text.find("NCCL transport ON") != std::string::npos}};
  if (!cuda) r.failure = "the configure log does not say \"CUDA backend ON\": no CUDA build (is nvcc installed?)";
  return r;
}

StageResult bundle_result(const std::string& bundle_dir, const BundleManifest& manifest,
                          const std::vector<std::string>& mismatches, const std::vector<std::string>& linked,
                          const std::string& launch_report, bool dry) {
  nlohmann::json libraries = nlohmann::json::array();
  bool all_found = false;
  std::istringstream lines(launch_report);
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find_first_not_of(" \t"), last = line.find_last_not_of(" \t\r");
    if (line.find(".so.") != std::string::npos) libraries.push_back(line.substr(first, last - first + 1));
    if (line.find("all ") != std::string::npos && line.find("found") != std::string::npos) all_found = true;
  }
  StageResult r;
  r.result = {{"built", false}, {"bundle", bundle_dir}, {"code_version", manifest.code_version},
              {"files", manifest.files.size()}, {"sha256_mismatch", mismatches}, {"device_libraries", libraries},
              {"compiled_paths_linked", linked}, {"all_device_libraries_found", all_found}};
  if (!mismatches.empty()) {
    std::string names;
    for (const auto& m : mismatches) names += (names.empty() ? "" : ", ") + m;
    r.failure = std::to_string(mismatches.size()) + " of " + std::to_string(manifest.files.size()) +
                " files differ from manifest.json: " + names;
  } else if (!dry && !all_found) {
    r.failure = "bundle: the device libraries are not all found (launch --report in the log)";
  }
  return r;
}

}  // namespace shardtrain::deviceproof
