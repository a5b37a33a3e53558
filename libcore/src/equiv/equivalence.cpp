#include "shardtrain/equiv/equivalence.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/h5file.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/ckpt/commit.hpp"
#include "shardtrain/ckpt/read.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain::equiv {
namespace {

template <typename Bits, typename T>
Bits bits_of(T x) {
  Bits b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Sign-magnitude -> (negative?, magnitude); +0 and -0 both give magnitude 0.
template <typename Bits, typename T>
std::uint64_t ulp_generic(T a, T b) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na && nb ? 0 : kInfiniteUlp;
  constexpr Bits sign = Bits(1) << (sizeof(Bits) * 8 - 1);
  const Bits ba = bits_of<Bits>(a), bb = bits_of<Bits>(b);
  const std::uint64_t ma = std::uint64_t(ba & ~sign), mb = std::uint64_t(bb & ~sign);
  const bool sa = (ba & sign) && ma != 0, sb = (bb & sign) && mb != 0;
  if (sa == sb) return ma > mb ? ma - mb : mb - ma;
  return ma + mb;  // opposite signs: through zero (fits: each magnitude < 2^63)
}

template <typename T>
TensorDiff compare_generic(const std::string& name, const T* a, const T* b, std::size_t n, const Tolerance& tol) {
  TensorDiff d;
  d.name = name;
  d.dtype = sizeof(T) == 4 ? "float32" : "float64";
  d.count = n;
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  for (std::size_t i = 0; i < n; ++i) {
    const T x = a[i], y = b[i];
    if (bits_of<Bits>(x) == bits_of<Bits>(y)) continue;
    ++d.bits_differ;
    const std::uint64_t ulp = ulp_generic<Bits>(x, y);
    d.max_ulp = std::max(d.max_ulp, ulp);
    const bool both_nan = std::isnan(x) && std::isnan(y);
    double abs_diff = 0.0, rel = 0.0;
    if (!both_nan) {
      const double dx = double(x), dy = double(y);
      abs_diff = (std::isnan(dx) || std::isnan(dy)) ? INFINITY : (dx == dy ? 0.0 : std::fabs(dx - dy));
      if (std::isnan(abs_diff)) abs_diff = INFINITY;  // inf - inf of equal sign is caught by dx == dy
      rel = abs_diff == 0.0 ? 0.0 : (dy == 0.0 ? INFINITY : abs_diff / std::fabs(dy));
    }
    d.max_abs = std::max(d.max_abs, abs_diff);
    d.max_rel = std::max(d.max_rel, rel);
    const bool pass = both_nan || abs_diff <= tol.atol + tol.rtol * std::fabs(double(y)) || ulp <= tol.ulps;
    if (!pass) {
      if (d.outside == 0) d.first_outside = std::int64_t(i);
      ++d.outside;
    }
  }
  d.verdict = d.outside ? Verdict::kDifferent : d.bits_differ ? Verdict::kWithin : Verdict::kBitwise;
  return d;
}

std::string lower_ext(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

InputKind kind_of(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return InputKind::kCheckpoint;
  const std::string ext = lower_ext(path);
  if (ext == ".jsonl") return InputKind::kStepLog;
  if (ext == ".h5" || ext == ".hdf5") return InputKind::kParams;
  throw UsageError(path + ": cannot tell the input kind from the extension '" + ext +
                   "' (.jsonl: step log; .h5/.hdf5: parameters; a folder: checkpoint); pass --kind steps|params");
}

void require_input(const std::string& path, const char* which, InputKind kind) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return;
  if (std::filesystem::is_directory(path, ec)) {
    if (kind == InputKind::kAuto || kind == InputKind::kCheckpoint) return;
    throw UsageError(std::string(which) + " '" + path + "' is a folder, not a " + kind_name(kind) +
                     " file; drop --kind to compare it as a checkpoint");
  }
  throw UsageError(std::string(which) + " '" + path + "': no such file or folder");
}

// ---- step logs ----
std::map<std::int64_t, double> read_losses(const std::string& path) {
  // The one step-log reader (telemetry/step_log.hpp): its rules for torn lines, other records and
  // repeated steps; here only the records that carry a loss count.
  const StepLogContents log = read_step_log(path);
  std::map<std::int64_t, double> loss;
  for (const StepLogEntry& e : log.steps)
    if (e.has_loss) loss[e.record.step] = e.record.loss;  // NaN: a non-finite loss (written as null)
  if (loss.empty()) throw UsageError(path + ": no line with \"step\" and \"loss\" (not a step log?)");
  return loss;
}

void compare_step_logs(EquivReport& report) {
  const auto la = read_losses(report.options.a), lb = read_losses(report.options.b);
  std::vector<double> a, b;
  std::vector<std::int64_t> steps;
  std::uint64_t only_a = 0, only_b = 0;
  for (const auto& [s, v] : la) {
    auto it = lb.find(s);
    if (it == lb.end()) {
      ++only_a;
      continue;
    }
    steps.push_back(s);
    a.push_back(v);
    b.push_back(it->second);
  }
  for (const auto& [s, v] : lb) only_b += la.count(s) ? 0 : 1;
  if (steps.empty())
    throw UsageError("no step in common between " + report.options.a + " (steps " + std::to_string(la.begin()->first) +
                     ".." + std::to_string(la.rbegin()->first) + ") and " + report.options.b + " (steps " +
                     std::to_string(lb.begin()->first) + ".." + std::to_string(lb.rbegin()->first) + ")");
  TensorDiff d = compare_generic("loss", a.data(), b.data(), a.size(), report.options.tolerance);
  if (d.first_outside >= 0) d.first_outside = steps[std::size_t(d.first_outside)];
  d.shape_a = {std::int64_t(la.size())};
  d.shape_b = {std::int64_t(lb.size())};
  if (only_a || only_b) {
    d.problem = "steps only in A: " + std::to_string(only_a) + ", only in B: " + std::to_string(only_b);
    d.verdict = Verdict::kDifferent;
  }
  report.tensors.push_back(std::move(d));
}

std::string shape_text(const std::vector<std::int64_t>& s);

// ---- parameter files ----
struct FloatDataset {
  std::vector<std::int64_t> dims;
  std::size_t bytes = 4;
};

std::map<std::string, FloatDataset> float_datasets(const H5File& f, const std::string& group) {
  std::map<std::string, FloatDataset> out;
  for (const auto& info : f.list_datasets(group.empty() ? "/" : group))
    if (info.type_class == 'f' && (info.element_bytes == 4 || info.element_bytes == 8))
      out[info.path] = {info.dims, info.element_bytes};
  return out;
}

std::string join_group(const std::string& group, const std::string& rel) {
  if (group.empty() || group == "/") return "/" + rel;
  return (group.front() == '/' ? group : "/" + group) + "/" + rel;
}

void compare_params(EquivReport& report) {
  const auto& o = report.options;
  std::unique_ptr<H5File> fa, fb;
  try {
    fa = std::make_unique<H5File>(o.a, H5File::Mode::kRead);
    fb = std::make_unique<H5File>(o.b, H5File::Mode::kRead);
  } catch (const IoError& e) {
    throw UsageError(e.what());
  }
  const auto da = float_datasets(*fa, o.group_a), db = float_datasets(*fb, o.group_b);
  std::size_t common = 0;
  for (const auto& [name, _] : da) common += db.count(name);
  if (common == 0)
    throw UsageError("no float dataset in common between " + o.a + " (" + std::to_string(da.size()) + " under '" +
                     (o.group_a.empty() ? "/" : o.group_a) + "') and " + o.b + " (" + std::to_string(db.size()) +
                     " under '" + (o.group_b.empty() ? "/" : o.group_b) + "'); check --group");
  std::map<std::string, int> names;
  for (const auto& [n, _] : da) names[n] |= 1;
  for (const auto& [n, _] : db) names[n] |= 2;
  for (const auto& [name, where] : names) {
    TensorDiff d;
    d.name = name;
    if (where != 3) {
      if (where == 1) d.shape_a = da.at(name).dims, d.dtype = da.at(name).bytes == 4 ? "float32" : "float64";
      else d.shape_b = db.at(name).dims, d.dtype = db.at(name).bytes == 4 ? "float32" : "float64";
      d.problem = where == 1 ? "only in A" : "only in B";
      d.verdict = Verdict::kDifferent;
      report.tensors.push_back(std::move(d));
      continue;
    }
    const auto& ia = da.at(name);
    const auto& ib = db.at(name);
    if (ia.bytes != ib.bytes) {
      d.shape_a = ia.dims, d.shape_b = ib.dims;
      d.dtype = "mixed";
      d.problem = "dtype mismatch (" + std::string(ia.bytes == 4 ? "float32" : "float64") + " vs " +
                  (ib.bytes == 4 ? "float32" : "float64") + ")";
      d.verdict = Verdict::kDifferent;
      report.tensors.push_back(std::move(d));
      continue;
    }
    if (ia.dims != ib.dims) {
      d.shape_a = ia.dims, d.shape_b = ib.dims;
      d.dtype = ia.bytes == 4 ? "float32" : "float64";
      d.problem = "shape mismatch: " + shape_text(ia.dims) + " vs " + shape_text(ib.dims);
      d.verdict = Verdict::kDifferent;
      report.tensors.push_back(std::move(d));
      continue;
    }
    const std::string pa = join_group(o.group_a, name), pb = join_group(o.group_b, name);
    if (ia.bytes == 4) {
      const auto va = fa->read_floats(pa), vb = fb->read_floats(pb);
      d = compare_generic(name, va.data(), vb.data(), va.size(), o.tolerance);
    } else {
      const auto va = fa->read_doubles(pa), vb = fb->read_doubles(pb);
      d = compare_generic(name, va.data(), vb.data(), va.size(), o.tolerance);
    }
    d.shape_a = ia.dims, d.shape_b = ib.dims;
    report.tensors.push_back(std::move(d));
  }
}

// ---- checkpoints ----
// The step_<N> folder `path` stands for: itself when it holds index.h5, else the one its `latest`
// names. No fallback to another step when that one is bad: the user asked about this one.
std::string checkpoint_folder(const std::string& path, const char* which) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(fs::path(path) / ckpt::kIndexFile, ec)) return path;
  std::string latest;
  try {
    latest = ckpt::read_latest(path);
  } catch (const IoError& e) {
    throw UsageError(std::string(which) + " '" + path + "': " + e.what());
  }
  if (latest.empty())
    throw UsageError(std::string(which) + " '" + path + "' is neither a checkpoint (no index.h5) nor a checkpoint "
                     "folder with a `latest` file; pass a step_<N> folder");
  return (fs::path(path) / latest).string();
}

std::unique_ptr<ckpt::CheckpointReader> open_checkpoint(const std::string& path, const char* which) {
  const std::string folder = checkpoint_folder(path, which);
  try {
    return std::make_unique<ckpt::CheckpointReader>(folder);  // validated: sizes, SHA-256, coverage
  } catch (const Error& e) {
    throw UsageError(std::string(which) + " '" + path + "': " + e.what());
  }
}

// A whole logical tensor's bytes (the reader checks its sum64).
std::vector<unsigned char> tensor_bytes(const ckpt::CheckpointReader& r, const ckpt::TensorInfo& t) {
  std::vector<unsigned char> out(std::size_t(t.spec.bytes()));
  r.read(t.spec.name, out.data());
  return out;
}

// Integer tensors (counters): equal or not, no tolerance. max_abs over the values as doubles.
template <typename I>
TensorDiff compare_integers(const std::string& name, const unsigned char* a, const unsigned char* b, std::size_t n) {
  TensorDiff d;
  d.name = name;
  d.count = n;
  for (std::size_t i = 0; i < n; ++i) {
    I x, y;
    std::memcpy(&x, a + i * sizeof(I), sizeof(I));
    std::memcpy(&y, b + i * sizeof(I), sizeof(I));
    if (x == y) continue;
    ++d.bits_differ;
    if (d.outside++ == 0) d.first_outside = std::int64_t(i);
    d.max_abs = std::max(d.max_abs, std::fabs(double(x) - double(y)));
    d.max_rel = std::max(d.max_rel, y == 0 ? INFINITY : std::fabs(double(x) - double(y)) / std::fabs(double(y)));
    d.max_ulp = kInfiniteUlp;  // no ULPs between integers: never within --ulps
  }
  d.verdict = d.outside ? Verdict::kDifferent : Verdict::kBitwise;
  return d;
}

TensorDiff compare_tensor(const ckpt::CheckpointReader& ra, const ckpt::CheckpointReader& rb,
                          const ckpt::TensorInfo& ta, const Tolerance& tol) {
  const auto va = tensor_bytes(ra, ta), vb = tensor_bytes(rb, rb.at(ta.spec.name));
  const std::size_t n = std::size_t(ta.spec.numel());
  const std::string& name = ta.spec.name;
  switch (ta.spec.dtype) {
    case DType::kFloat32:
      return compare_generic(name, reinterpret_cast<const float*>(va.data()), reinterpret_cast<const float*>(vb.data()), n, tol);
    case DType::kFloat64:
      return compare_generic(name, reinterpret_cast<const double*>(va.data()), reinterpret_cast<const double*>(vb.data()), n, tol);
    case DType::kInt32: return compare_integers<std::int32_t>(name, va.data(), vb.data(), n);
    case DType::kInt64: return compare_integers<std::int64_t>(name, va.data(), vb.data(), n);
    case DType::kUInt64: return compare_integers<std::uint64_t>(name, va.data(), vb.data(), n);
    case DType::kUInt8: return compare_integers<std::uint8_t>(name, va.data(), vb.data(), n);
  }
  throw Error(ExitCode::kInternal, name + ": unknown dtype");
}

void compare_checkpoints(EquivReport& report) {
  const auto& o = report.options;
  const auto ra = open_checkpoint(o.a, "A"), rb = open_checkpoint(o.b, "B");
  report.checkpoint_a = ra->folder(), report.checkpoint_b = rb->folder();
  report.step_a = ra->manifest().step, report.step_b = rb->manifest().step;
  std::map<std::string, int> names;
  for (const auto& t : ra->tensors()) names[t.spec.name] |= 1;
  for (const auto& t : rb->tensors()) names[t.spec.name] |= 2;
  std::size_t common = 0;
  for (const auto& [n, where] : names) common += where == 3;
  if (common == 0)
    throw UsageError("no tensor in common between the checkpoints " + ra->folder() + " (" +
                     std::to_string(ra->tensors().size()) + " tensors) and " + rb->folder() + " (" +
                     std::to_string(rb->tensors().size()) + ")");
  for (const auto& [name, where] : names) {
    const ckpt::TensorInfo* ta = ra->find(name);
    const ckpt::TensorInfo* tb = rb->find(name);
    TensorDiff d;
    d.name = name;
    if (ta) d.shape_a = ta->spec.shape;
    if (tb) d.shape_b = tb->spec.shape;
    d.dtype = dtype_name((ta ? ta : tb)->spec.dtype);
    if (where != 3) {
      d.problem = where == 1 ? "only in A" : "only in B";
    } else if (ta->spec.dtype != tb->spec.dtype) {
      d.dtype = "mixed";
      d.problem = std::string("dtype mismatch (") + dtype_name(ta->spec.dtype) + " vs " + dtype_name(tb->spec.dtype) + ")";
    } else if (ta->spec.shape != tb->spec.shape) {
      d.problem = "shape mismatch: " + shape_text(ta->spec.shape) + " vs " + shape_text(tb->spec.shape);
    } else {
      d = compare_tensor(*ra, *rb, *ta, o.tolerance);
      d.shape_a = ta->spec.shape, d.shape_b = tb->spec.shape;
      d.dtype = dtype_name(ta->spec.dtype);
    }
    if (!d.problem.empty()) d.verdict = Verdict::kDifferent;
    report.tensors.push_back(std::move(d));
  }
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::ostringstream out;
  out << '(';
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out << ',';
    out << s[i];
  }
  if (s.size() == 1) out << ',';
  out << ')';
  return out.str();
}

std::string num(double x) {
  if (std::isinf(x)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", x);
  return buf;
}

nlohmann::json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

const char* kRule = "|a-b| <= atol + rtol*|b| or ulp(a,b) <= ulps (b: file B)";

}  // namespace

std::uint64_t ulp_distance(float a, float b) { return ulp_generic<std::uint32_t>(a, b); }
std::uint64_t ulp_distance(double a, double b) { return ulp_generic<std::uint64_t>(a, b); }

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kBitwise: return "BITWISE";
    case Verdict::kWithin: return "WITHIN";
    case Verdict::kDifferent: return "DIFFERENT";
  }
  return "?";
}

const char* kind_name(InputKind k) {
  switch (k) {
    case InputKind::kAuto: return "auto";
    case InputKind::kStepLog: return "steps";
    case InputKind::kParams: return "params";
    case InputKind::kCheckpoint: return "checkpoint";
  }
  return "?";
}

TensorDiff compare_values(const std::string& name, const float* a, const float* b, std::size_t n, const Tolerance& tol) {
  return compare_generic(name, a, b, n, tol);
}
TensorDiff compare_values(const std::string& name, const double* a, const double* b, std::size_t n, const Tolerance& tol) {
  return compare_generic(name, a, b, n, tol);
}

int exit_code(Verdict v) { return v == Verdict::kDifferent ? 1 : 0; }

EquivReport compare_files(const EquivOptions& options) {
  if (options.tolerance.rtol < 0 || options.tolerance.atol < 0 || std::isnan(options.tolerance.rtol) ||
      std::isnan(options.tolerance.atol))
    throw UsageError("--rtol and --atol must be non-negative numbers");
  require_input(options.a, "A", options.kind);
  require_input(options.b, "B", options.kind);
  EquivReport report;
  report.options = options;
  if (options.kind == InputKind::kAuto) {
    const InputKind ka = kind_of(options.a), kb = kind_of(options.b);
    if (ka != kb)
      throw UsageError("A '" + options.a + "' is a " + kind_name(ka) + " file but B '" + options.b + "' is a " +
                       kind_name(kb) + " file (by extension); pass --kind to override");
    report.kind = ka;
  } else {
    report.kind = options.kind;
  }
  if (report.kind == InputKind::kStepLog) compare_step_logs(report);
  else if (report.kind == InputKind::kCheckpoint) compare_checkpoints(report);
  else compare_params(report);
  std::sort(report.tensors.begin(), report.tensors.end(),
            [](const TensorDiff& x, const TensorDiff& y) { return x.name < y.name; });
  report.verdict = Verdict::kBitwise;
  for (const auto& t : report.tensors) report.verdict = std::max(report.verdict, t.verdict);
  return report;
}

std::string EquivReport::table() const {
  std::size_t name_w = 6, shape_w = 5;
  for (const auto& t : tensors) {
    name_w = std::max(name_w, t.name.size());
    shape_w = std::max(shape_w, shape_text(t.shape_a.empty() ? t.shape_b : t.shape_a).size());
  }
  const auto& tol = options.tolerance;
  std::ostringstream out;
  char line[512];
  out << "# equiv-check (" << kind_name(kind) << "): A = " << options.a << "\n";
  out << "#                       B = " << options.b << " (reference)\n";
  if (kind == InputKind::kCheckpoint)
    out << "# checkpoints: A step " << step_a << " (" << checkpoint_a << "), B step " << step_b << " ("
        << checkpoint_b << ")\n";
  std::snprintf(line, sizeof line, "# tolerance: rtol=%g atol=%g ulps=%llu; rule: %s\n", tol.rtol, tol.atol,
                static_cast<unsigned long long>(tol.ulps), kRule);
  out << line;
  std::snprintf(line, sizeof line, "# %-*s %*s %10s %10s %12s %12s %10s  %-9s %s\n", int(name_w), "tensor", int(shape_w),
                "shape", "count", "max_abs", "max_rel", "max_ulp", "outside", "verdict", "note");
  out << line;
  std::snprintf(line, sizeof line, "# %-*s %*s %10s %10s %12s %12s %10s\n", int(name_w), "", int(shape_w), "",
                "(elems)", "", "(|a-b|/|b|)", kind == InputKind::kStepLog ? "(f64 ulp)" : "(ulp)", "(elems)");
  out << line;
  int counts[3] = {0, 0, 0};
  for (const auto& t : tensors) {
    counts[int(t.verdict)]++;
    const bool compared = t.count > 0 || t.problem.empty() || t.name == "loss";
    auto cell = [&](const std::string& v) { return compared ? v : std::string("-"); };
    const std::string ulp = t.max_ulp == kInfiniteUlp ? "inf" : std::to_string(t.max_ulp);
    std::snprintf(line, sizeof line, "  %-*s %*s %10s %10s %12s %12s %10s  %-9s %s\n", int(name_w), t.name.c_str(),
                  int(shape_w), shape_text(t.shape_a.empty() ? t.shape_b : t.shape_a).c_str(),
                  cell(std::to_string(t.count)).c_str(), cell(num(t.max_abs)).c_str(), cell(num(t.max_rel)).c_str(),
                  cell(ulp).c_str(), cell(std::to_string(t.outside)).c_str(), verdict_name(t.verdict), t.problem.c_str());
    out << line;
  }
  std::snprintf(line, sizeof line, "# %zu compared: %d bitwise, %d within tolerance, %d different\n", tensors.size(),
                counts[0], counts[1], counts[2]);
  out << line;
  out << "verdict: " << (verdict == Verdict::kWithin ? "WITHIN tolerance" : verdict_name(verdict)) << "\n";
  return out.str();
}

nlohmann::json EquivReport::to_json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& t : tensors) {
    rows.push_back({{"name", t.name},
                    {"shape_a", t.shape_a},
                    {"shape_b", t.shape_b},
                    {"dtype", t.dtype},
                    {"count", t.count},
                    {"max_abs", finite_or_null(t.max_abs)},
                    {"max_rel", finite_or_null(t.max_rel)},
                    {"max_ulp", t.max_ulp == kInfiniteUlp ? nlohmann::json(nullptr) : nlohmann::json(t.max_ulp)},
                    {"bits_differ", t.bits_differ},
                    {"outside", t.outside},
                    {"first_outside", t.first_outside},
                    {"problem", t.problem},
                    {"verdict", verdict_name(t.verdict)}});
  }
  return {{"tool", "equiv-check"},
          {"code_version", code_version()},
          {"kind", kind_name(kind)},
          {"a", options.a},
          {"b", options.b},
          {"group_a", options.group_a},
          {"group_b", options.group_b},
          {"checkpoint_a", kind == InputKind::kCheckpoint ? nlohmann::json(checkpoint_a) : nlohmann::json(nullptr)},
          {"checkpoint_b", kind == InputKind::kCheckpoint ? nlohmann::json(checkpoint_b) : nlohmann::json(nullptr)},
          {"step_a", kind == InputKind::kCheckpoint ? nlohmann::json(step_a) : nlohmann::json(nullptr)},
          {"step_b", kind == InputKind::kCheckpoint ? nlohmann::json(step_b) : nlohmann::json(nullptr)},
          {"tolerance", {{"rtol", options.tolerance.rtol}, {"atol", options.tolerance.atol}, {"ulps", options.tolerance.ulps}}},
          {"rule", kRule},
          {"tensors", rows},
          {"verdict", verdict_name(verdict)},
          {"exit_code", exit_code(verdict)}};
}

}  // namespace shardtrain::equiv
