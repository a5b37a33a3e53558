// The gpu-check runner: the plan's stages, each a short list of commands (argument vectors, no
// shell) under the stage's limit, then the stage's result from what the tools wrote.
#include "shardtrain/deviceproof/gpu_check.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/deviceproof/gpu_check_plan.hpp"
#include "shardtrain/deviceproof/gpu_check_results.hpp"
#include "shardtrain/equiv/equivalence.hpp"
#include "deviceproof/text_file.hpp"

namespace fs = std::filesystem;

namespace shardtrain::deviceproof {
namespace {

using Clock = std::chrono::steady_clock;

// The stop signal an outer time limit sent (SIGTERM, SIGINT), or 0: the stage in flight is ended
// and recorded "interrupted", and summary.json is still written.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// The stage's limit passed (timed_out) or we were asked to stop.
struct StageEnded {
  bool timed_out;
};
// A command of the stage failed, or its figures did: the stage's exit code and reason.
struct StageFailed {
  int exit_code;
  std::string reason;
};

std::string last_lines(const std::string& path, std::size_t n) {
  std::string out;
  for (const auto& l : last_lines_of(path, n)) out += l + "\n";
  return out;
}

std::string joined(const std::vector<std::string>& words, const std::string& sep = " ") {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int positive_env(const char* name, int fallback) {
  const std::string text = env_or(name, "");
  if (text.empty()) return fallback;
  try {
    std::size_t used = 0;
    const long v = std::stol(text, &used);
    if (used == text.size() && v > 0) return int(v);
  } catch (const std::exception&) {
  }
  throw UsageError(std::string(name) + " must be a positive whole number (got '" + text + "')");
}

std::string absolute(const std::string& p) { return fs::absolute(p).lexically_normal().string(); }

// One stage's commands: each appended to the stage's log (or a log of its own), each under what is
// left of the stage's limit.
class StageRunner {
 public:
  StageRunner(std::string log, Clock::time_point deadline) : log_(std::move(log)), deadline_(deadline) {}
  const std::string& log() const { return log_; }

  void say(const std::string& text) const {
    std::ofstream out(log_, std::ios::app);
    out << text << (text.empty() || text.back() != '\n' ? "\n" : "");
  }

  // Runs argv to the end or to the stage's limit (StageEnded); returns its exit status.
  int run(const std::vector<std::string>& argv, const std::string& log = "") const {
    say("+ " + joined(argv));
    const double left = std::chrono::duration<double>(deadline_ - Clock::now()).count();
    if (left <= 0) throw StageEnded{true};
    const auto r = run_child_limited(argv, log.empty() ? log_ : log, left, [] { return g_stop_signal != 0; });
    if (r.timed_out || r.stopped) throw StageEnded{r.timed_out};
    return r.status;
  }
  // run(), and a nonzero status fails the stage.
  void check(const std::vector<std::string>& argv, const std::string& log = "") const {
    const int rc = run(argv, log);
    if (rc != 0) throw StageFailed{rc, "exit " + std::to_string(rc) + ": see " + log_};
  }
  // What a command printed (at most `cap_s` seconds, within the stage's limit), trimmed; nothing
  // when it cannot start or fails.
  std::optional<std::string> output_of(const std::vector<std::string>& argv, const std::string& file, double cap_s) const {
    const double left = std::chrono::duration<double>(deadline_ - Clock::now()).count();
    if (find_on_path(argv[0]).empty()) return std::nullopt;
    fs::remove(file);
    const auto r = run_child_limited(argv, file, std::min(cap_s, left), [] { return g_stop_signal != 0; });
    if (r.stopped) throw StageEnded{false};
    if (r.timed_out || r.status != 0) return std::nullopt;
    std::string text = read_text(file);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  }

 private:
  std::string log_;
  Clock::time_point deadline_;
};

class GpuCheck {
 public:
  GpuCheck(const GpuCheckOptions& o) : o_(o) {
    const fs::path exe_dir = o.exe_dir.empty() ? fs::current_path() : fs::path(o.exe_dir);
    const fs::path above = exe_dir.parent_path();
    if (fs::exists(above / "manifest.json") && access((above / "launch").c_str(), X_OK) == 0) bundle_ = above.string();
    here_ = bundle_.empty() ? find_clone(exe_dir) : bundle_;
    const std::string default_build =
        !bundle_.empty() ? bundle_ : o.dry_run ? above.string() : (fs::path(here_) / "build-gpu").string();
    build_ = absolute(env_or("BUILD_DIR", default_build));
    bin_ = build_ + "/bin";
    res_ = absolute(env_or("OUT", (fs::current_path() / "gpu-check-out").string())) + "/gpu-check";
    work_ = res_ + "/work";
    budget_s_ = positive_env("PART_BUDGET_S", bundle_.empty() ? 540 : 480);
    jobs_ = positive_env("JOBS", int(std::max(1u, std::thread::hardware_concurrency())));
    sizes_ = gpu_check_sizes(o.dry_run, positive_env("GPT2_MICRO_BATCH", 16));
    fortunes_ = absolute(env_or("FORTUNES", here_ + "/data/fortunes.h5"));
    plan_ = gpu_check_plan(!bundle_.empty());
    const Part part = parse_part(o.part);
    const auto only = o.only.empty() ? std::vector<std::string>{} : parse_only(o.only, plan_);
    selected_ = select_stages(plan_, part, only);
  }

  int run() {
    std::cout << plan_text(selected_, o_.part, o_.dry_run, res_) << std::flush;
    if (o_.list) return 0;
    fs::create_directories(work_);
    // Every mpirun of the stages runs as root on the device machine.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    std::signal(SIGTERM, on_stop_signal);
    std::signal(SIGINT, on_stop_signal);
    const auto start = Clock::now();
    std::vector<StageRecord> records;
    bool failed = false;
    for (const auto& stage : selected_) {
      if (g_stop_signal != 0) break;  // stopped between stages (or during an in-process comparison)
      const double used = std::chrono::duration<double>(Clock::now() - start).count();
      StageRecord rec;
      rec.stage = stage.name, rec.limit_s = stage.limit_s, rec.log = res_ + "/" + stage.name + ".log";
      if (!fits_budget(used, stage.limit_s, budget_s_)) {
        rec.status = StageStatus::kSkipped;
        rec.reason = "part budget: " + std::to_string(int(used)) + "s used of " + std::to_string(int(budget_s_)) + "s";
        std::cout << "== " << stage.name << ": skipped (needs up to " << stage.limit_s << "s, " << int(used)
                  << "s of the " << int(budget_s_) << "s part budget used)" << std::endl;
        write_record(rec, records);
        continue;
      }
      std::cout << "== " << stage.name << " (limit " << stage.limit_s << "s)" << std::endl;
      run_one(stage, rec);
      write_record(rec, records);
      std::cout << "   " << status_name(rec.status) << " in " << int(rec.seconds) << "s"
                << (rec.reason.empty() ? "" : ": " + rec.reason) << std::endl;
      if (rec.status != StageStatus::kPass) {
        failed = true;
        std::istringstream tail(last_lines(rec.log, 5));
        for (std::string line; std::getline(tail, line);) std::cout << "   | " << line << "\n";
      }
      if (rec.status == StageStatus::kInterrupted) break;
      if (stage.name == "build" && rec.status != StageStatus::kPass) {
        std::cout << "== the build failed: the remaining stages need it; stopping" << std::endl;
        break;
      }
    }
    write_json_file(res_ + "/summary.json", summary_json(records, o_.dry_run, bundle_));
    for (const auto& r : records) {
      char line[96];
      std::snprintf(line, sizeof line, "  %-22s %-8s %6.0f s  ", r.stage.c_str(), status_name(r.status), r.seconds);
      std::cout << line << r.reason << "\n";
    }
    std::cout << "gpu-check: results in " << res_ << " (summary.json)" << std::endl;
    if (g_stop_signal != 0) return 143;
    return failed ? 1 : 0;
  }

 private:
  // The clone above a build's bin/ (CLONE/build/bin), else the working folder: where data/ and
  // scripts/prepare-data.sh are.
  static std::string find_clone(const fs::path& exe_dir) {
    for (fs::path p = exe_dir.parent_path(); !p.empty() && p != p.parent_path(); p = p.parent_path())
      if (fs::exists(p / "scripts" / "prepare-data.sh")) return p.string();
    return fs::current_path().string();
  }

  void write_record(const StageRecord& rec, std::vector<StageRecord>& records) {
    write_json_file(res_ + "/" + rec.stage + ".json", rec.to_json());
    records.push_back(rec);
  }

  void run_one(const StagePlan& stage, StageRecord& rec) {
    fs::remove(rec.log);
    std::ofstream(rec.log).close();
    const auto t0 = Clock::now();
    const StageRunner s(rec.log, t0 + std::chrono::seconds(stage.limit_s));
    try {
      const StageResult r = run_stage(stage.name, s);
      rec.result = r.result;
      if (!r.failure.empty()) throw StageFailed{1, r.failure};
    } catch (const StageEnded& e) {
      rec.status = e.timed_out ? StageStatus::kTimeout : StageStatus::kInterrupted;
      rec.exit_code = e.timed_out ? 124 : 143;
      rec.reason = e.timed_out ? "over its " + std::to_string(stage.limit_s) + "s limit"
                               : "the part was stopped during this stage";
    } catch (const StageFailed& f) {
      rec.status = StageStatus::kFail, rec.exit_code = f.exit_code, rec.reason = f.reason;
    } catch (const Error& e) {  // unreadable output of a tool, a missing program
      rec.status = StageStatus::kFail, rec.exit_code = int(e.code()), rec.reason = e.what();
    }
    if (rec.status == StageStatus::kFail) s.say("gpu-check: " + rec.reason);
    rec.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }

  StageResult run_stage(const std::string& name, const StageRunner& s) {
    const std::map<std::string, StageResult (GpuCheck::*)(const StageRunner&)> stages = {
        {"env", &GpuCheck::env},
        {"build", &GpuCheck::build},
        {"data", &GpuCheck::data},
        {"gpu_tests", &GpuCheck::gpu_tests},
        {"cpu_gpu_equivalence", &GpuCheck::cpu_gpu_equivalence},
        {"shared_gpu_2rank", &GpuCheck::shared_gpu_2rank},
        {"deterministic_bitwise", &GpuCheck::deterministic_bitwise},
        {"resume_cross_device", &GpuCheck::resume_cross_device},
        {"bf16_vs_fp32", &GpuCheck::bf16_vs_fp32},
        {"gpt2_124m", &GpuCheck::gpt2_124m},
        {"cpu_scaling", &GpuCheck::cpu_scaling},
    };
    return (this->*stages.at(name))(s);
  }

  // ---- helpers of the stages ----

  // ddp-train under mpirun on `np` ranks, its output in DIR.log (its tail in the stage's log when
  // it fails).
  void train(const StageRunner& s, int np, const std::string& dir, const std::vector<std::string>& args) const {
    fs::create_directories(fs::path(dir).parent_path());
    std::vector<std::string> argv = {"mpirun", "-np", std::to_string(np)};
    if (unsigned(np) > std::thread::hardware_concurrency()) argv.push_back("--oversubscribe");
    argv.push_back(bin_ + "/ddp-train");
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--run-dir", dir});
    const std::string log = dir + ".log";
    fs::remove(log);
    const int rc = s.run(argv, log);
    if (rc != 0) {
      s.say(last_lines(log, 20));
      throw StageFailed{rc, "exit " + std::to_string(rc) + ": ddp-train in " + dir + " (its log: " + log + ")"};
    }
  }

  // equiv-check's comparison, in process: its table in the stage's log.
  equiv::EquivReport compare(const StageRunner& s, const std::string& a, const std::string& b, double rtol,
                             double atol = 0) const {
    equiv::EquivOptions o;
    o.a = a, o.b = b, o.tolerance.rtol = rtol, o.tolerance.atol = atol;
    std::ostringstream line;
    line << "+ equiv-check " << a << " " << b;
    if (rtol > 0) line << " --rtol " << rtol;
    if (atol > 0) line << " --atol " << atol;
    s.say(line.str() + "  (in process)");
    auto report = equiv::compare_files(o);
    s.say(report.table());
    return report;
  }

  // The corpus of the training stages: fortunes when present, else the Markov set.
  std::string corpus() const { return fs::exists(fortunes_) ? fortunes_ : work_ + "/data/markov.h5"; }

  std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) const {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::vector<std::string> small_args(std::vector<std::string> before, const std::vector<std::string>& after) const {
    before.insert(before.end(), sizes_.small.begin(), sizes_.small.end());
    return with(before, after);
  }

  // ---- the stages ----

  StageResult env(const StageRunner& s) {
    StageResult r;
    const auto smi = s.output_of({"nvidia-smi", "-L"}, work_ + "/env-nvidia-smi.txt", 10);
    r.result["gpus"] = find_on_path("nvidia-smi").empty() ? "no nvidia-smi" : smi.value_or("unavailable");
    const std::string nvcc = "/usr/local/cuda/bin/nvcc";
    if (fs::exists(nvcc)) {
      const std::string text = s.output_of({nvcc, "--version"}, work_ + "/env-nvcc.txt", 10).value_or("unavailable");
      r.result["nvcc"] = nlohmann::json::array({text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1)});
    } else {
      r.result["nvcc"] = "no nvcc";
    }
    r.result["nccl_header"] = fs::exists("/usr/local/cuda/include/nccl.h");
    r.result["cpus"] = std::thread::hardware_concurrency();
    for (const char* t : {"cmake", "mpirun", "h5dump", "gnuplot", "nvidia-smi"})
      r.result["tools"][t] = !find_on_path(t).empty();
    r.result["dry_run"] = o_.dry_run;
    r.result["bundle"] = bundle_.empty() ? nlohmann::json(nullptr) : nlohmann::json(bundle_);
    s.say(r.result.dump(1));
    return r;
  }

  void need_tools(const std::string& where) const {
    for (const char* t : {"ddp-train", "equiv-check", "scale-bench", "data-prep"})
      if (access((bin_ + "/" + t).c_str(), X_OK) != 0)
        throw StageFailed{1, where + ": " + bin_ + "/" + t + " missing: build " + build_ + " first"};
  }

  StageResult build(const StageRunner& s) {
    if (!bundle_.empty()) return bundle(s);
    if (o_.dry_run) {
      need_tools("dry run");
      if (access((build_ + "/tests/shardtrain_tests").c_str(), X_OK) != 0)
        throw StageFailed{1, "dry run: " + build_ + "/tests/shardtrain_tests missing"};
      s.say("dry run: using the existing build " + build_ + " (not rebuilt)");
      return {{{"built", false}, {"dry_run", true}}, ""};
    }
    const std::string configure_log = work_ + "/configure.log";
    fs::remove(configure_log);
    s.check({"cmake", "-S", here_, "-B", build_, "-DCMAKE_BUILD_TYPE=Release", "-DSHARDTRAIN_CUDA=ON"}, configure_log);
    s.say(read_text(configure_log));
    s.check({"cmake", "--build", build_, "-j", std::to_string(jobs_), "--target", "shardtrain_tests", "ddp-train",
             "fsdp-train", "data-prep", "equiv-check", "scale-bench"});
    return build_result(read_text(configure_log));
  }

  // The bundle in place of a build: every file as the manifest says, the launcher's report, and
  // the paths compiled into shardtrain_tests (its test data, the tools) linked to the bundle's copies.
  StageResult bundle(const StageRunner& s) {
    const std::string report = work_ + "/launch-report.txt";
    fs::remove(report);
    s.check({bundle_ + "/launch", "--report"}, report);
    s.say(read_text(report));
    const auto manifest = read_bundle_manifest(bundle_ + "/manifest.json");
    const auto bad = bundle_mismatches(bundle_, manifest);
    std::vector<std::string> linked;
    for (const auto& [want, sub] : {std::pair{manifest.compiled_testdata, "testdata"}, std::pair{manifest.compiled_bin, "bin"}}) {
      if (fs::exists(want)) continue;
      fs::create_directories(fs::path(want).parent_path());
      fs::create_directory_symlink(fs::path(bundle_) / sub, want);
      linked.push_back(want);
    }
    auto r = bundle_result(bundle_, manifest, bad, linked, read_text(report), o_.dry_run);
    s.say(r.result.dump(1));
    if (r.failure.empty()) need_tools("bundle");
    return r;
  }

  StageResult data(const StageRunner& s) {
    fs::create_directories(work_ + "/data");
    if (fs::exists(fortunes_)) {
      s.say("fortunes: " + fortunes_);
    } else if (fs::is_directory("/usr/share/games/fortunes")) {
      setenv("DATA_DIR", fs::path(fortunes_).parent_path().c_str(), 1);  // where prepare-data.sh writes
      s.check({here_ + "/scripts/prepare-data.sh", build_});
    } else {
      s.say("no fortunes corpus (data/fortunes.h5 missing and no /usr/share/games/fortunes): carry data/ to the device");
    }
    const std::string markov = work_ + "/data/markov.h5";
    s.check({bin_ + "/data-prep", "--synthetic", "markov", "--documents", "64", "--doc-tokens", "20000", "-o", markov});
    return {{{"fortunes", fs::exists(fortunes_) ? nlohmann::json(fortunes_) : nlohmann::json(nullptr)},
             {"markov", markov}},
            ""};
  }

  StageResult gpu_tests(const StageRunner& s) {
    const std::string tests = build_ + "/tests/shardtrain_tests", junit = work_ + "/gpu_tests.xml";
    const int rc = s.run({tests, "[gpu]", "-r", "junit", "-o", junit});
    const int nccl_rc = s.run({tests, "[nccl]"});
    return gpu_tests_result(junit, rc, nccl_rc, o_.dry_run);
  }

  StageResult cpu_gpu_equivalence(const StageRunner& s) {
    const auto a = small_args({"--data", corpus()}, {"--micro-batch", "2", "--global-batch", "4", "--steps",
                                                      std::to_string(sizes_.steps_short), "--deterministic",
                                                      "--log-every", "1000"});
    train(s, 1, work_ + "/equiv/cpu", with(a, {"--device", "cpu"}));
    train(s, 1, work_ + "/equiv/dev", with(a, {"--device", sizes_.device, "--precision", sizes_.high_precision}));
    return equivalence_result(
        compare(s, work_ + "/equiv/dev/steps.rank0.jsonl", work_ + "/equiv/cpu/steps.rank0.jsonl", 1e-3));
  }

  StageResult shared_gpu_2rank(const StageRunner& s) {
    const auto a = small_args({"--data", corpus()}, {"--micro-batch", "2", "--global-batch", "4", "--steps",
                                                      std::to_string(sizes_.steps_short), "--device", sizes_.device,
                                                      "--precision", sizes_.high_precision, "--log-every", "1000"});
    train(s, 1, work_ + "/shared/w1", a);
    train(s, 2, work_ + "/shared/w2", with(a, {"--transport", sizes_.transport}));
    return equivalence_result(
        compare(s, work_ + "/shared/w2/steps.rank0.jsonl", work_ + "/shared/w1/steps.rank0.jsonl", 1e-3));
  }

  StageResult deterministic_bitwise(const StageRunner& s) {
    const auto a = small_args({"--data", corpus()}, {"--micro-batch", "2", "--global-batch", "8", "--steps",
                                                      std::to_string(sizes_.steps_short), "--device", sizes_.device,
                                                      "--precision", sizes_.high_precision, "--deterministic",
                                                      "--log-every", "1000"});
    train(s, 1, work_ + "/det/w1", a);
    train(s, 2, work_ + "/det/w2", with(a, {"--transport", sizes_.transport}));
    return equivalence_result(compare(s, work_ + "/det/w2/params.h5", work_ + "/det/w1/params.h5", 0),
                              equiv::Verdict::kBitwise);
  }

  StageResult resume_cross_device(const StageRunner& s) {
    const std::string full = std::to_string(sizes_.steps_short), half = std::to_string(sizes_.steps_short / 2);
    const auto a = small_args({"--data", corpus()},
                              {"--micro-batch", "2", "--global-batch", "4", "--deterministic", "--log-every", "1000"});
    const std::string r = work_ + "/resume";
    const std::vector<std::string> dev = {"--device", sizes_.device, "--precision", sizes_.high_precision};
    const std::vector<std::string> cpu = {"--device", "cpu"};
    const std::vector<std::string> first = {"--steps", half, "--ckpt-every", half};
    const std::vector<std::string> second = {"--steps", full, "--resume", "auto"};
    train(s, 1, r + "/cpu_full", with(with(a, {"--steps", full}), cpu));
    train(s, 1, r + "/dev_cpu", with(with(a, first), dev));  // device first half -> cpu second half
    train(s, 1, r + "/dev_cpu", with(with(a, second), cpu));
    train(s, 1, r + "/cpu_dev", with(with(a, first), cpu));  // cpu first half -> device second half
    train(s, 1, r + "/cpu_dev", with(with(a, second), dev));
    // A low-precision device checkpoint resumes on the cpu (fp32 logical tensors).
    train(s, 1, r + "/low_cpu", with(with(a, first), {"--device", sizes_.device, "--precision", sizes_.low_precision}));
    train(s, 1, r + "/low_cpu", with(with(a, second), cpu));
    const auto dev_cpu = compare(s, r + "/dev_cpu/params.h5", r + "/cpu_full/params.h5", 1e-3, 1e-5);
    const auto cpu_dev = compare(s, r + "/cpu_dev/params.h5", r + "/cpu_full/params.h5", 1e-3, 1e-5);
    return resume_result(dev_cpu, cpu_dev, r + "/low_cpu/summary.json");
  }

  StageResult bf16_vs_fp32(const StageRunner& s) {
    const std::string data = corpus();
    // The hold-out: fortunes after 2019 (as scripts/demo.sh), or the Markov set's last days.
    const std::string cutoff = data == work_ + "/data/markov.h5" ? "2024-02-20T00:00:00Z" : "2019-01-01T00:00:00Z";
    const auto a = small_args({"--data", data, "--cutoff", cutoff},
                              {"--micro-batch", "8", "--global-batch", "8", "--steps", std::to_string(sizes_.steps_bf16),
                               "--warmup", std::to_string(sizes_.warmup), "--lr", "2e-3", "--eval-samples", "128",
                               "--log-every", "1000", "--device", sizes_.device, "--deterministic"});
    train(s, 1, work_ + "/prec/fp32", with(a, {"--precision", sizes_.high_precision}));
    train(s, 1, work_ + "/prec/low", with(a, {"--precision", sizes_.low_precision}));
    auto r = bf16_vs_fp32_result(work_ + "/prec", sizes_.warmup, data);
    s.say(r.result.dump(1));
    return r;
  }

  StageResult gpt2_124m(const StageRunner& s) {
    auto a = with({"--data", work_ + "/data/markov.h5"}, sizes_.gpt2);
    a = with(a, {"--steps", std::to_string(sizes_.gpt2_steps), "--warmup", "2", "--log-every", "10", "--device",
                 sizes_.device, "--precision", sizes_.low_precision, "--eval-samples", "2"});
    train(s, 1, work_ + "/gpt2", a);
    auto r = gpt2_result(work_ + "/gpt2/summary.json");
    s.say(r.result.dump(1));
    return r;
  }

  StageResult cpu_scaling(const StageRunner& s) {
    std::vector<std::string> each;
    for (int w : sizes_.scale_workers) each.push_back(std::to_string(w));
    const std::string workers = joined(each, ",");
    const auto argv = small_args({bin_ + "/scale-bench", "run", "--workers", workers, "--out", work_ + "/scaling", "--",
                                  "--data", corpus()},
                                 {"--micro-batch", "8", "--global-batch", "8", "--steps",
                                  std::to_string(sizes_.scale_steps), "--device", "cpu", "--log-every", "1000"});
    const int rc = s.run(argv);
    auto r = cpu_scaling_result(work_ + "/scaling", sizes_.scale_workers, rc, int(std::thread::hardware_concurrency()));
    s.say(r.result.dump(1));
    return r;
  }

  GpuCheckOptions o_;
  std::string bundle_, here_, build_, bin_, res_, work_, fortunes_;
  double budget_s_ = 540;
  int jobs_ = 1;
  Sizes sizes_;
  std::vector<StagePlan> plan_, selected_;
};

}  // namespace

int run_gpu_check(const GpuCheckOptions& options) { return GpuCheck(options).run(); }

}  // namespace shardtrain::deviceproof
