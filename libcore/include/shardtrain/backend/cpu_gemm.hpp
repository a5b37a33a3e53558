// The CPU backend's GEMM libraries: which of oneDNN, OpenBLAS and BLIS run its matrix products,
// and the start-up measurement that picks the fastest at the model's own shapes (--gemm).
//
// A build always has oneDNN and links OpenBLAS and BLIS where their Debian packages
// (libopenblas-openmp-dev, libblis-openmp-dev) were installed when it was configured
// (cmake/gemm_libraries.cmake). Every library runs in the OpenMP variant, on the backend's thread
// count (--threads), so the backend's loops and the library share one thread pool.
//
// Every matrix product of a CPU backend (matmul_forward/backward and the attention products) runs
// on its one current library. Results differ between libraries only by fp32 rounding (a product
// of K terms summed in another order: within the kernel tests' kReduction tolerance); for a fixed
// library, thread count and shapes they are bitwise reproducible, so deterministic mode keeps its
// promise as long as every rank of a job uses the same library, which the trainers ensure
// (train/job.cpp: one decision from the same all-gathered measurements on every rank).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/base/json_record.hpp"

namespace shardtrain {

// kAuto: measure and take the fastest (choose_gemm_library). The others force one library.
enum class GemmLibrary { kAuto, kOneDnn, kOpenBlas, kBlis };
// The one table of its names (--gemm), in the order --help lists them and ties are broken.
inline constexpr std::pair<const char*, GemmLibrary> kGemmLibraryNames[] = {{"auto", GemmLibrary::kAuto},
                                                                            {"onednn", GemmLibrary::kOneDnn},
                                                                            {"openblas", GemmLibrary::kOpenBlas},
                                                                            {"blis", GemmLibrary::kBlis}};
// "auto" / "onednn" / "openblas" / "blis".
const char* gemm_library_name(GemmLibrary library);
// Parses a name of kGemmLibraryNames; throws UsageError naming `option` and the choices otherwise.
GemmLibrary parse_gemm_library(const std::string& text, const char* option = "--gemm");

// The concrete libraries this build links (never kAuto), oneDNN first, in table order.
std::vector<GemmLibrary> linked_gemm_libraries();
bool gemm_library_linked(GemmLibrary library);
// Throws UsageError (exit 2) when `library` is neither kAuto nor linked, naming the Debian package
// to install and the rebuild (scripts/setup.sh). `option` names the option that asked for it.
void require_gemm_library(GemmLibrary library, const char* option = "--gemm");
// What runs, as loaded: "oneDNN 2.6.3", "OpenBLAS 0.3.21 (openmp, core Zen)", "BLIS 0.9.0 (openmp,
// zen3)". Throws UsageError for a library that is not linked.
std::string gemm_library_version(GemmLibrary library);

// A CPU backend (make_cpu_backend) whose products run on `library` (kAuto is oneDNN: the backend
// itself never measures; the trainers do, below). UsageError for a library that is not linked.
std::unique_ptr<Backend> make_cpu_backend(int threads, GemmLibrary library);
// The library of a CPU backend's products, and switching it (from the next product on). Both throw
// UsageError for a backend that is not the CPU backend; set_ also for kAuto and unlinked libraries.
GemmLibrary cpu_gemm_library(const Backend& backend);
void set_cpu_gemm_library(Backend& backend, GemmLibrary library);

// ---- the measurement at start ----

// The products of one training step of the model on one rank: the per-rank (tensor-parallel
// local) widths. rows = batch x seq_len tokens of a micro-batch.
struct GemmProbeModel {
  std::int64_t batch = 0, seq_len = 0, channels = 0;   // B, T, C
  std::int64_t attention_channels = 0, heads = 0;      // AC = C / tp, NH / tp
  std::int64_t mlp_channels = 0, vocab = 0;            // F = 4C / tp, the LM head's (local) vocabulary
  std::int64_t layers = 0;
};

// One kind of product of the step, timed on one library: a linear layer's matmul_forward plus its
// matmul_backward (din, dweight, dbias), or one attention_forward plus attention_backward.
//   flops: the measured call's FLOPs as MFU counts them (6 x rows x in x out for a linear layer;
//          12 x B x T^2 x AC for attention, including the masked half the backend skips);
//   seconds: the best of the timed repeats; per_step: how often the step runs it (layers, or 1);
//   scale: the model's call is `scale` times the measured one's FLOPs, taken to run at the measured
//          rate (1 where the model's shape was measured whole; see kGemmProbeRows).
struct GemmShapeRate {
  std::string name;  // "qkv 2048x256->768", "lm head 256x768->1024 (of 1024x768->50257)", ...
  double flops = 0, seconds = 0;
  std::int64_t per_step = 1;
  double scale = 1;
  double gflops() const { return seconds > 0 ? flops / seconds / 1e9 : 0.0; }
  double flops_per_s() const { return gflops() * 1e9; }
  static auto fields() {  // "scale" absent in files written before it: measured whole
    using namespace json_fields;
    using S = GemmShapeRate;
    return std::tuple{key("name", &S::name), key("flops", &S::flops), key("seconds", &S::seconds),
                      key("per_step", &S::per_step), key("scale", &S::scale, kMayBeAbsent),
                      written("flops_per_s", &S::flops_per_s)};
  }
};

// The measured calls are capped, so that choosing costs about a second at GPT-2 small instead of
// the 44 s and 12.5 GB resident that measuring its whole shapes took (the LM head alone, 1024 x
// 768 -> 50257, is 237 GFLOP forward and backward, and the operands were sized for the widest
// layer squared): a linear layer at most kGemmProbeRows rows (tokens) and kGemmProbeWidth input
// and output features, attention sequences of at most kGemmProbeSeqLen, as many as fit in
// kGemmProbeRows tokens (at least one). Why this still ranks the libraries: 256 rows are many
// times every library's register block and cache panel, so the packing each library does per call
// is paid over as many rows as in the model's products, and 1,024 features keep every operand
// beyond the L2 cache, as the model's are. The rate decides the library only; MFU's peak is
// measured on its own (peak.hpp).
inline constexpr std::int64_t kGemmProbeRows = 256;
inline constexpr std::int64_t kGemmProbeWidth = 1024;
inline constexpr std::int64_t kGemmProbeSeqLen = 256;

// One library's rates at every shape, and the step's total: the rate at the model's shapes is
// sum(per_step x scale x flops) / sum(per_step x scale x seconds), the throughput one step's
// products would run at.
struct GemmLibraryRates {
  GemmLibrary library = GemmLibrary::kOneDnn;
  std::vector<GemmShapeRate> shapes;
  double step_flops() const;
  double step_seconds() const;
  double gflops() const { return step_seconds() > 0 ? step_flops() / step_seconds() / 1e9 : 0.0; }
  double flops_per_s() const { return gflops() * 1e9; }
  std::string version() const;  // the library's version, "not linked" when it is not
  static auto fields() {
    using namespace json_fields;
    using R = GemmLibraryRates;
    return std::tuple{key("library", &R::library, names(kGemmLibraryNames)), written("version", &R::version),
                      written("flops_per_s", &R::flops_per_s), key("shapes", &R::shapes)};
  }
};

// Times every library of `libraries` on `backend` (a CPU backend; its library is restored after)
// at the model's shapes, capped as above: per shape one untimed warm-up (oneDNN creates its primitives there), then
// the best of `repeats` calls, or of more while they add up to under 50 ms (a small model's
// products are microseconds long, and a few of them can all be hit by a loaded machine). About
// 0.3-0.6 s per library at the benchmark model on one core.
std::vector<GemmLibraryRates> probe_gemm_libraries(Backend& backend, const GemmProbeModel& model,
                                                   const std::vector<GemmLibrary>& libraries, int repeats = 3);

// The decision and why. `rates` are the measurements every rank agrees on (the trainers take the
// slowest rank's seconds per shape, so all ranks hold identical numbers and decide alike).
//   requested != kAuto: that library (must be linked), reason "forced by --gemm".
//   kAuto and deterministic: oneDNN without measuring (rates may be empty), because a choice
//     by timing could differ between two runs that deterministic mode promises bitwise equal.
//   kAuto: the highest rate at the model's shapes, except that oneDNN, the default, is kept
//     unless another library beats it by more than kGemmSwitchMargin: differences that small are
//     within what two start-ups on a loaded machine measure, and chasing them would make the
//     library (so the last bits of every result) flip between otherwise identical runs.
//     Among the others a tie goes to the earlier library of the table.
inline constexpr double kGemmSwitchMargin = 0.05;
struct GemmChoice {
  GemmLibrary library = GemmLibrary::kOneDnn;
  GemmLibrary requested = GemmLibrary::kAuto;
  std::string reason;                   // one line for the log and the summary
  std::vector<GemmLibraryRates> rates;  // as measured (empty when nothing was)
  // The chosen library's rate at the model's shapes (FLOP/s; 0 when not measured).
  double chosen_flop_per_s() const;
  std::string version() const;  // the chosen library's
  static auto fields() {
    using namespace json_fields;
    using C = GemmChoice;
    return std::tuple{key("library", &C::library, names(kGemmLibraryNames)), written("version", &C::version),
                      key("requested", &C::requested, names(kGemmLibraryNames)), key("reason", &C::reason),
                      written("model_shapes_flops_per_s", &C::chosen_flop_per_s), key("measured", &C::rates)};
  }
};
GemmChoice choose_gemm_library(GemmLibrary requested, bool deterministic, std::vector<GemmLibraryRates> rates);

// {"library", "version", "requested", "reason", "model_shapes_flops_per_s" (chosen_flop_per_s),
//  "measured": [{"library", "version", "flops_per_s", "shapes": [{"name", "flops", "seconds",
//  "per_step", "scale", "flops_per_s"}]}]} (GemmChoice::fields): the run summary's "gemm" and the
// cache's file. from_json reads back what to_json wrote (UsageError on anything else, naming the
// field by its pointer).
nlohmann::json gemm_choice_to_json(const GemmChoice& choice);
GemmChoice gemm_choice_from_json(const nlohmann::json& json);

// ---- the cache of measured decisions ----
// Two runs of the same model with the same seed are bitwise identical (fast mode included), and a
// resumed run continues its first launch bit for bit; a decision re-measured at every start could
// flip between two close libraries and break both. So --gemm auto's measured decision is kept, per
// machine, in SHARDTRAIN_GEMM_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/shardtrain/gemm; "off"
// measures at every start), one JSON file per key: the processor's model name, the thread count,
// the model's shapes and the linked libraries' versions. Later runs with that key take the cached
// library without measuring. Delete the folder to measure again (a new processor or library
// version gets a new key by itself).
// The file for `model` at `threads` ("" when the cache is off).
std::string gemm_cache_path(const GemmProbeModel& model, int threads);
// The cached decision, or nothing when there is none or the file is unreadable (then re-measured).
std::optional<GemmChoice> read_gemm_cache(const std::string& path);
// Best effort: a cache that cannot be written is not an error of the run. Returns whether it was.
bool write_gemm_cache(const std::string& path, const GemmChoice& choice);

}  // namespace shardtrain
