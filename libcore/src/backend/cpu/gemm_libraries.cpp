// The GEMM libraries of the CPU backend besides oneDNN (OpenBLAS through CBLAS, BLIS through its
// own typed API), their names and versions, and the start-up measurement (cpu_gemm.hpp).
#include <dlfcn.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "gemm.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"

#ifdef SHARDTRAIN_HAVE_OPENBLAS
#include SHARDTRAIN_OPENBLAS_CBLAS_H
#endif
#ifdef SHARDTRAIN_HAVE_BLIS
// blis.h's inline helpers trip -Wextra (unused parameters, comparisons always true); not ours to fix.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wtype-limits"
#include SHARDTRAIN_BLIS_H
#pragma GCC diagnostic pop
#endif

namespace shardtrain {
namespace cpu {
namespace {

// C_b <- bias in every row (so that beta = 1 then adds the product to it), for the libraries whose
// GEMM has no bias: C = A B + bias is C = bias; C += A B. With accumulate the bias is added to the
// existing C instead. One pass over C, which the product reads anyway.
void prepare_c(int64_t batch, int64_t M, int64_t N, float* C, Strides c, const float* bias, bool accumulate) {
  if (!bias) return;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t m = 0; m < M; ++m) {
      float* row = C + b * c.batch + m * c.row;
      if (accumulate)
        for (int64_t n = 0; n < N; ++n) row[n] += bias[n];
      else
        std::memcpy(row, bias, std::size_t(N) * sizeof(float));
    }
}

#ifdef SHARDTRAIN_HAVE_OPENBLAS
// OpenBLAS (OpenMP build): CBLAS row-major, an operand with unit column stride is "no transpose"
// with ld = its row stride, one with unit row stride is "transpose" with ld = its column stride.
class OpenBlasGemm final : public Gemm {
 public:
  explicit OpenBlasGemm(int threads) : threads_(threads) {}
  void run(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, Strides a, const float* B, Strides b,
           float* C, Strides c, float alpha, const float* bias, bool accumulate) override {
    // The OpenMP build sizes its team from the calling thread's OpenMP setting, like oneDNN.
    omp_set_num_threads(threads_);
    openblas_set_num_threads(threads_);
    const auto layout = [](const Strides& s, int64_t cols, CBLAS_TRANSPOSE& t, blasint& ld) {
      if (s.col == 1 && s.row >= std::max<int64_t>(1, cols)) {
        t = CblasNoTrans, ld = blasint(s.row);
      } else if (s.row == 1) {
        t = CblasTrans, ld = blasint(s.col);
      } else {
        throw Error(ExitCode::kInternal, "OpenBLAS product: an operand with neither unit row nor unit column stride");
      }
    };
    CBLAS_TRANSPOSE ta, tb;
    blasint lda, ldb;
    layout(a, K, ta, lda);
    layout(b, N, tb, ldb);
    prepare_c(batch, M, N, C, c, bias, accumulate);
    const float beta = (accumulate || bias) ? 1.0f : 0.0f;
    for (int64_t i = 0; i < batch; ++i)
      cblas_sgemm(CblasRowMajor, ta, tb, blasint(M), blasint(N), blasint(K), alpha, A + i * a.batch, lda,
                  B + i * b.batch, ldb, beta, C + i * c.batch, blasint(c.row));
  }

 private:
  int threads_;
};
#endif

#ifdef SHARDTRAIN_HAVE_BLIS
// BLIS (OpenMP build): its typed API takes a row and a column stride per operand, so every layout
// of gemm.hpp goes in as it is.
class BlisGemm final : public Gemm {
 public:
  explicit BlisGemm(int threads) : threads_(threads) {}
  void run(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, Strides a, const float* B, Strides b,
           float* C, Strides c, float alpha, const float* bias, bool accumulate) override {
    // BLIS keeps its thread count in a global; set it for this backend before every product.
    bli_thread_set_num_threads(threads_);
    prepare_c(batch, M, N, C, c, bias, accumulate);
    float beta = (accumulate || bias) ? 1.0f : 0.0f;
    for (int64_t i = 0; i < batch; ++i)
      bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, M, N, K, &alpha, const_cast<float*>(A + i * a.batch), a.row,
                a.col, const_cast<float*>(B + i * b.batch), b.row, b.col, &beta, C + i * c.batch, c.row, c.col);
  }

 private:
  int threads_;
};
#endif

#ifdef SHARDTRAIN_HAVE_OPENBLAS
// OpenBLAS and BLIS both export cblas_sgemm; the dynamic linker binds the one loaded first (the
// build lists OpenBLAS first). Calling BLIS through an OpenBLAS label would be a silent lie in
// every log, so check where the symbol really lives.
bool cblas_is_openblas() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) || !info.dli_fname) return false;
  return std::strstr(info.dli_fname, "openblas") != nullptr;
}
#endif

}  // namespace

std::unique_ptr<Gemm> make_openblas_gemm(int threads) {
  require_gemm_library(GemmLibrary::kOpenBlas);
#ifdef SHARDTRAIN_HAVE_OPENBLAS
  return std::make_unique<OpenBlasGemm>(threads);
#else
  (void)threads;
  return nullptr;
#endif
}

std::unique_ptr<Gemm> make_blis_gemm(int threads) {
  require_gemm_library(GemmLibrary::kBlis);
#ifdef SHARDTRAIN_HAVE_BLIS
  return std::make_unique<BlisGemm>(threads);
#else
  (void)threads;
  return nullptr;
#endif
}

}  // namespace cpu

// ---------------------------------------------------------------------------- names, versions

const char* gemm_library_name(GemmLibrary library) {
  for (const auto& [name, value] : kGemmLibraryNames)
    if (value == library) return name;
  return "?";
}

GemmLibrary parse_gemm_library(const std::string& text, const char* option) {
  std::string names;
  for (const auto& [name, value] : kGemmLibraryNames) {
    if (text == name) return value;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  throw UsageError(std::string(option) + ": '" + text + "' is not one of " + names);
}

bool gemm_library_linked(GemmLibrary library) {
  switch (library) {
    case GemmLibrary::kOneDnn:
      return true;
    case GemmLibrary::kOpenBlas:
#ifdef SHARDTRAIN_HAVE_OPENBLAS
      return cpu::cblas_is_openblas();
#else
      return false;
#endif
    case GemmLibrary::kBlis:
#ifdef SHARDTRAIN_HAVE_BLIS
      return true;
#else
      return false;
#endif
    case GemmLibrary::kAuto:
      break;
  }
  return false;
}

std::vector<GemmLibrary> linked_gemm_libraries() {
  std::vector<GemmLibrary> out;
  for (const auto& [name, value] : kGemmLibraryNames)
    if (value != GemmLibrary::kAuto && gemm_library_linked(value)) out.push_back(value);
  return out;
}

void require_gemm_library(GemmLibrary library, const char* option) {
  if (library == GemmLibrary::kAuto || gemm_library_linked(library)) return;
  const char* package = library == GemmLibrary::kOpenBlas ? "libopenblas-openmp-dev" : "libblis-openmp-dev";
  const char* label = library == GemmLibrary::kOpenBlas ? "OpenBLAS" : "BLIS";
#ifdef SHARDTRAIN_HAVE_OPENBLAS
  if (library == GemmLibrary::kOpenBlas)  // linked, but its CBLAS symbols bound to another library
    throw UsageError(std::string(option) + " openblas: this binary's cblas_sgemm is not OpenBLAS's (another "
                     "library that exports CBLAS was loaded first); use --gemm auto, onednn or blis");
#endif
  throw UsageError(std::string(option) + " " + gemm_library_name(library) + ": this build has no " + label +
                   "; install it (apt-get install " + package + ") and rebuild (scripts/setup.sh), or use --gemm auto");
}

std::string gemm_library_version(GemmLibrary library) {
  require_gemm_library(library);
  switch (library) {
    case GemmLibrary::kOneDnn: {
      const dnnl_version_t* v = dnnl_version();
      return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    }
    case GemmLibrary::kOpenBlas: {
#ifdef SHARDTRAIN_HAVE_OPENBLAS
      // openblas_get_config() begins "OpenBLAS 0.3.21 ..."; the variant and the kernel set it picked.
      std::string config = openblas_get_config();
      std::string version = config.substr(0, config.find(' ', std::strlen("OpenBLAS ")));
      const int parallel = openblas_get_parallel();
      const char* variant = parallel == 2 ? "openmp" : parallel == 1 ? "pthread" : "serial";
      return version + " (" + variant + ", core " + openblas_get_corename() + ")";
#else
      break;
#endif
    }
    case GemmLibrary::kBlis: {
#ifdef SHARDTRAIN_HAVE_BLIS
      return std::string("BLIS ") + bli_info_get_version_str() + " (" +
             (bli_info_get_enable_openmp() ? "openmp" : "not openmp") + ", " + bli_arch_string(bli_arch_query_id()) +
             ")";
#else
      break;
#endif
    }
    case GemmLibrary::kAuto:
      return "auto";
  }
  return "?";
}

// ---------------------------------------------------------------------------- the measurement

double GemmLibraryRates::step_flops() const {
  double f = 0;
  for (const GemmShapeRate& s : shapes) f += double(s.per_step) * s.scale * s.flops;
  return f;
}

double GemmLibraryRates::step_seconds() const {
  double t = 0;
  for (const GemmShapeRate& s : shapes) t += double(s.per_step) * s.scale * s.seconds;
  return t;
}

double GemmChoice::chosen_flop_per_s() const {
  for (const GemmLibraryRates& r : rates)
    if (r.library == library) return r.gflops() * 1e9;
  return 0.0;
}

namespace {

// Deterministic values in [-1, 1): the products' speed does not depend on them, but denormals or
// all-equal inputs would not be what training sees.
std::vector<float> probe_values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = float(seed >> 8) / float(1u << 23) - 1.0f;
  }
  return v;
}

DeviceArray<float> probe_array(Backend& backend, std::size_t n, std::uint32_t seed) {
  DeviceArray<float> a(backend, n);
  const std::vector<float> v = probe_values(n, seed);
  a.upload(v.data(), n);
  return a;
}

// The best of at least `repeats` timed calls, and of more while they add up to less than
// kMinProbeSeconds (at most kMaxProbeRepeats): a small model's products take microseconds, and
// three of them on a loaded machine can all land on a time slice lost to another process (a
// measured 0.1 GFLOP/s for oneDNN was seen so), which the cache would then keep.
constexpr double kMinProbeSeconds = 0.05;
constexpr int kMaxProbeRepeats = 200;
template <typename Fn>
double best_seconds(Backend& backend, int repeats, const Fn& fn) {
  fn();  // warm-up: primitive creation, first touch of the operands
  backend.synchronize();
  double best = std::numeric_limits<double>::infinity(), total = 0;
  for (int i = 0; i < kMaxProbeRepeats && (i < std::max(1, repeats) || total < kMinProbeSeconds); ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    backend.synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, seconds);
    total += seconds;
  }
  return best;
}

}  // namespace

std::vector<GemmLibraryRates> probe_gemm_libraries(Backend& backend, const GemmProbeModel& m,
                                                   const std::vector<GemmLibrary>& libraries, int repeats) {
  const GemmLibrary before = cpu_gemm_library(backend);
  const std::int64_t tokens = m.batch * m.seq_len;
  struct Linear {
    const char* name;
    std::int64_t in, out, per_step;
    bool bias;
  };
  const Linear linears[] = {{"qkv", m.channels, 3 * m.attention_channels, m.layers, true},
                            {"attention proj", m.attention_channels, m.channels, m.layers, true},
                            {"mlp fc", m.channels, m.mlp_channels, m.layers, true},
                            {"mlp proj", m.mlp_channels, m.channels, m.layers, true},
                            {"lm head", m.channels, m.vocab, 1, false}};
  // The measured calls: each of the model's shapes capped at kGemmProbeRows x kGemmProbeWidth
  // (attention: one sequence of at most kGemmProbeSeqLen), so operands stay a few megabytes.
  const std::size_t N = std::size_t(std::min(tokens, kGemmProbeRows));
  std::int64_t widest = 1;
  for (const Linear& l : linears) widest = std::max({widest, std::min(l.in, kGemmProbeWidth), std::min(l.out, kGemmProbeWidth)});
  const std::size_t W = std::size_t(widest);
  DeviceArray<float> in = probe_array(backend, N * W, 1), weight = probe_array(backend, W * W, 2),
                     bias = probe_array(backend, W, 3), out(backend, N * W), dout = probe_array(backend, N * W, 4),
                     din(backend, N * W), dweight(backend, W * W), dbias(backend, W);
  // Attention: sequences of at most kGemmProbeSeqLen, as many as fit in kGemmProbeRows tokens (one at least).
  const std::int64_t probe_seq = std::min(m.seq_len, kGemmProbeSeqLen);
  const std::size_t T = std::size_t(probe_seq),
                    B = std::size_t(std::max<std::int64_t>(1, std::min(m.batch, kGemmProbeRows / std::max<std::int64_t>(1, probe_seq)))),
                    AC = std::size_t(m.attention_channels), NH = std::size_t(m.heads);
  DeviceArray<float> qkv = probe_array(backend, B * T * 3 * AC, 5), aout(backend, B * T * AC),
                     att(backend, backend.attention_state_elements(B, NH, T)),
                     adout = probe_array(backend, B * T * AC, 6), dqkv(backend, B * T * 3 * AC);
  std::vector<GemmLibraryRates> all;
  try {
    for (GemmLibrary library : libraries) {
      set_cpu_gemm_library(backend, library);
      GemmLibraryRates rates;
      rates.library = library;
      for (const Linear& l : linears) {
        if (l.out <= 0 || l.in <= 0) continue;
        const std::size_t in_width = std::size_t(std::min(l.in, kGemmProbeWidth)),
                          out_width = std::size_t(std::min(l.out, kGemmProbeWidth));
        GemmShapeRate s;
        s.name = std::string(l.name) + " " + std::to_string(N) + "x" + std::to_string(in_width) + "->" +
                 std::to_string(out_width);
        s.flops = 6.0 * double(N) * double(in_width) * double(out_width);
        s.scale = 6.0 * double(tokens) * double(l.in) * double(l.out) / s.flops;
        if (s.scale != 1.0)
          s.name += " (of " + std::to_string(tokens) + "x" + std::to_string(l.in) + "->" + std::to_string(l.out) + ")";
        s.per_step = l.per_step;
        s.seconds = best_seconds(backend, repeats, [&] {
          backend.matmul_forward(out.data(), in.data(), weight.data(), l.bias ? bias.data() : nullptr, N, in_width,
                                 out_width);
          backend.matmul_backward(din.data(), dweight.data(), l.bias ? dbias.data() : nullptr, dout.data(), in.data(),
                                  weight.data(), N, in_width, out_width);
        });
        rates.shapes.push_back(s);
      }
      if (NH > 0 && AC > 0) {
        GemmShapeRate s;
        s.name = "attention B" + std::to_string(B) + " T" + std::to_string(T) + " C" + std::to_string(AC) + " NH" +
                 std::to_string(NH);
        s.flops = 12.0 * double(B) * double(T) * double(T) * double(AC);
        s.scale = 12.0 * double(m.batch) * double(m.seq_len) * double(m.seq_len) * double(AC) / s.flops;
        if (s.scale != 1.0) s.name += " (of B" + std::to_string(m.batch) + " T" + std::to_string(m.seq_len) + ")";
        s.per_step = m.layers;
        s.seconds = best_seconds(backend, repeats, [&] {
          backend.attention_forward(aout.data(), att.data(), qkv.data(), B, T, AC, NH);
          backend.attention_backward(dqkv.data(), adout.data(), qkv.data(), att.data(), B, T, AC, NH);
        });
        rates.shapes.push_back(s);
      }
      all.push_back(std::move(rates));
    }
  } catch (...) {
    set_cpu_gemm_library(backend, before);
    throw;
  }
  set_cpu_gemm_library(backend, before);
  return all;
}

GemmChoice choose_gemm_library(GemmLibrary requested, bool deterministic, std::vector<GemmLibraryRates> rates) {
  GemmChoice choice;
  choice.requested = requested;
  choice.rates = std::move(rates);
  // "openblas 71.2, onednn 60.1, blis 65.0 GFLOP/s at the model's shapes"
  std::string measured;
  for (const GemmLibraryRates& r : choice.rates) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s %.1f", gemm_library_name(r.library), r.gflops());
    measured += (measured.empty() ? "" : ", ") + std::string(buf);
  }
  if (!measured.empty()) measured += " GFLOP/s at the model's shapes";
  if (requested != GemmLibrary::kAuto) {
    require_gemm_library(requested);
    choice.library = requested;
    choice.reason = std::string("forced by --gemm ") + gemm_library_name(requested) +
                    (measured.empty() ? "" : " (measured: " + measured + ")");
    return choice;
  }
  if (deterministic) {
    choice.library = GemmLibrary::kOneDnn;
    choice.reason = "--gemm auto in deterministic mode: onednn without measuring (a choice by timing could differ "
                    "between runs that must agree bitwise; --gemm forces another)";
    return choice;
  }
  const GemmLibraryRates* best = nullptr;
  const GemmLibraryRates* onednn = nullptr;
  for (const GemmLibraryRates& r : choice.rates) {  // table order, so a tie keeps the earlier library
    if (!best || r.gflops() > best->gflops()) best = &r;
    if (r.library == GemmLibrary::kOneDnn) onednn = &r;
  }
  if (!best) {
    choice.library = GemmLibrary::kOneDnn;
    choice.reason = "--gemm auto with nothing measured: onednn";
    return choice;
  }
  if (onednn && best != onednn && best->gflops() <= onednn->gflops() * (1.0 + kGemmSwitchMargin)) {
    char margin[160];
    std::snprintf(margin, sizeof(margin), "onednn kept: %s is within %.0f%% of it", gemm_library_name(best->library),
                  100.0 * kGemmSwitchMargin);
    choice.library = GemmLibrary::kOneDnn;
    choice.reason = std::string(margin) + " (measured at start: " + measured + ")";
    return choice;
  }
  choice.library = best->library;
  choice.reason = std::string("fastest at the model's shapes (measured at start: ") + measured + ")";
  return choice;
}

std::string GemmLibraryRates::version() const {
  return gemm_library_linked(library) ? gemm_library_version(library) : "not linked";
}

std::string GemmChoice::version() const { return gemm_library_version(library); }

nlohmann::json gemm_choice_to_json(const GemmChoice& c) { return json_fields::write(c); }

GemmChoice gemm_choice_from_json(const nlohmann::json& j) {
  return json_fields::read<GemmChoice>(JsonFile::parse(j.dump(), "gemm decision", "the GEMM choice"), "");
}

namespace {

std::string processor_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown processor";
}

}  // namespace

std::string gemm_cache_path(const GemmProbeModel& m, int threads) {
  const char* env = std::getenv("SHARDTRAIN_GEMM_CACHE");
  std::string dir;
  if (env && *env) {
    if (std::string(env) == "off") return "";
    dir = env;
  } else {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg && *xdg) dir = std::string(xdg) + "/shardtrain/gemm";
    else if (home && *home) dir = std::string(home) + "/.cache/shardtrain/gemm";
    else return "";
  }
  std::string key = processor_name() + "|threads " + std::to_string(threads) + "|";
  for (std::int64_t v : {m.batch, m.seq_len, m.channels, m.attention_channels, m.heads, m.mlp_channels, m.vocab, m.layers})
    key += std::to_string(v) + ",";
  for (GemmLibrary library : linked_gemm_libraries()) key += "|" + gemm_library_version(library);
  return dir + "/" + hex64(fnv1a64(key)) + ".json";
}

std::optional<GemmChoice> read_gemm_cache(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    GemmChoice c = json_fields::read<GemmChoice>(JsonFile::read(path, "the GEMM choice cache"), "");
    if (!gemm_library_linked(c.library)) return std::nullopt;
    return c;
  } catch (const std::exception&) {  // a damaged or foreign file: measure again (and overwrite it)
    return std::nullopt;
  }
}

bool write_gemm_cache(const std::string& path, const GemmChoice& choice) {
  if (path.empty()) return false;
  try {
    // A temporary of this process's own, renamed over the file: jobs starting together on one
    // machine may write the same key, and each leaves a whole file.
    const std::filesystem::path target(path);
    std::filesystem::create_directories(target.parent_path());
    const std::string temporary = path + "." + std::to_string(::getpid()) + ".tmp";
    {
      std::ofstream out(temporary);
      out << gemm_choice_to_json(choice).dump(2) << "\n";
      if (!out) return false;
    }
    std::filesystem::rename(temporary, target);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace shardtrain
