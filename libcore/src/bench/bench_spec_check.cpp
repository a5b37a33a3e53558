#include "bench_spec_check.hpp"

#include <set>

#include "shardtrain/base/error.hpp"
#include "shardtrain/bench/bench_expr.hpp"

namespace shardtrain::bench {
namespace {

template <typename T>
void unique_names(const JsonFile& f, const std::vector<T>& items, const std::string& list, std::set<std::string>& seen) {
  for (std::size_t i = 0; i < items.size(); ++i)
    if (!seen.insert(items[i].name).second)
      f.fail("field " + list + "/" + std::to_string(i) + "/name: \"" + items[i].name + "\" is named twice");
}

void known_variants(const JsonFile& f, const BenchSpec& s, const std::vector<std::string>& names, const std::string& at) {
  for (const auto& n : names)
    if (!s.variant(n)) f.fail("field " + at + ": no variant \"" + n + "\"");
}

void known_option(const JsonFile& f, const BenchSpec& s, const std::string& when, const std::string& at) {
  if (!when.empty() && !s.options.count(when)) f.fail("field " + at + ": no option \"" + when + "\" in /options");
}

// A derived reading or a "where" may use only readings declared before it: they are read in order.
void earlier_reading(const JsonFile& f, const BenchSpec& s, std::size_t i, const std::string& name, const std::string& at) {
  for (std::size_t j = 0; j < i; ++j)
    if (s.readings[j].name == name) return;
  f.fail("field " + at + ": no reading \"" + name + "\" before this one");
}

}  // namespace

void check_names(const JsonFile& f, const BenchSpec& s) {
  std::set<std::string> variants, columns;
  unique_names(f, s.variants, "/variants", variants);
  unique_names(f, s.readings, "/readings", columns);
  unique_names(f, s.ratios, "/ratios", columns);
  for (std::size_t i = 0; i < s.variants.size(); ++i)
    known_option(f, s, s.variants[i].when, "/variants/" + std::to_string(i) + "/when");
  for (std::size_t i = 0; i < s.setup.size(); ++i) known_option(f, s, s.setup[i].when, "/setup/" + std::to_string(i) + "/when");
  for (std::size_t i = 0; i < s.readings.size(); ++i) {
    const auto& r = s.readings[i];
    const std::string at = "/readings/" + std::to_string(i);
    known_variants(f, s, r.variants, at + "/variants");
    if (r.kind == ReadingKind::kDerived)
      for (const auto& name : expression_names(r.expr)) earlier_reading(f, s, i, name, at + "/derived");
    if (r.where) earlier_reading(f, s, i, r.where->equals, at + "/where/equals");
  }
  for (std::size_t i = 0; i < s.ratios.size(); ++i) {
    const std::string at = "/ratios/" + std::to_string(i);
    if (!s.reading(s.ratios[i].reading)) f.fail("field " + at + "/reading: no reading \"" + s.ratios[i].reading + "\"");
    if (!s.reading(s.ratios[i].over)) f.fail("field " + at + "/over: no reading \"" + s.ratios[i].over + "\"");
    known_variants(f, s, {s.ratios[i].baseline}, at + "/baseline");
    known_variants(f, s, s.ratios[i].variants, at + "/variants");
  }
  for (std::size_t i = 0; i < s.checks.size(); ++i) {
    const std::string at = "/checks/" + std::to_string(i);
    if (!columns.count(s.checks[i].column)) f.fail("field " + at + "/column: no reading or ratio \"" + s.checks[i].column + "\"");
    known_variants(f, s, s.checks[i].variants, at + "/variants");
  }
}

void check_placeholders(const JsonFile& f, const BenchSpec& s) {
  Places known = places_for(s, "", "", "", 1, s.variants.front().name);
  auto check = [&](const std::string& text, const std::string& at) {
    try {
      expand(text, known, at);
    } catch (const UsageError& e) {
      f.fail(std::string("field ") + e.what());
    }
  };
  auto check_all = [&](const std::vector<std::string>& texts, const std::string& at) {
    for (std::size_t i = 0; i < texts.size(); ++i) check(texts[i], at + "/" + std::to_string(i));
  };
  for (const auto& [name, list] : s.arg_lists) check_all(list, "/args/" + name);
  for (const auto& [name, value] : s.env) check(value, "/env/" + name);
  for (std::size_t i = 0; i < s.setup.size(); ++i) check_all(s.setup[i].command, "/setup/" + std::to_string(i) + "/command");
  for (std::size_t i = 0; i < s.variants.size(); ++i) {
    const std::string at = "/variants/" + std::to_string(i);
    check_all(s.variants[i].command, at + "/command");
    check_all(s.variants[i].cleanup, at + "/cleanup");
    if (s.variants[i].kill) check(s.variants[i].kill->file, at + "/kill/file");
  }
  for (std::size_t i = 0; i < s.readings.size(); ++i) check(s.readings[i].file, "/readings/" + std::to_string(i) + "/file");
}

}  // namespace shardtrain::bench
