#include "shardtrain/bench/bench_figures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "shardtrain/bench/bench_expr.hpp"

namespace shardtrain::bench {
namespace {

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::optional<double> value_of(const RunRow* row, const std::string& name) {
  if (!row) return std::nullopt;
  const auto it = row->values.find(name);
  return it == row->values.end() ? std::nullopt : std::optional<double>(it->second);
}

const RunRow* find_row(const std::vector<RunRow>& rows, int round, const std::string& variant) {
  for (const auto& r : rows)
    if (r.round == round && r.variant == variant) return &r;
  return nullptr;
}

std::optional<double> ratio_in_round(const Ratio& ratio, const std::vector<RunRow>& rows, const RunRow& row) {
  const auto mine = value_of(&row, ratio.reading);
  const auto base = value_of(find_row(rows, row.round, ratio.baseline), ratio.over);
  if (!mine || !base || *base == 0) return std::nullopt;
  return *mine / *base * ratio.scale;
}

TableLine round_line(const BenchSpec& spec, const std::vector<std::string>& columns, const std::vector<RunRow>& rows,
                     const RunRow& row) {
  TableLine line{row.round, row.variant, {}, {}, 0};
  for (const auto& c : columns) {
    bool expected = has_column(spec, c, row.variant);
    const Ratio* ratio = nullptr;
    for (const auto& r : spec.ratios)
      if (r.name == c) ratio = &r;
    // A ratio to a variant that did not run this round (its `when` option unset) is no column here.
    if (ratio && !find_row(rows, row.round, ratio->baseline)) expected = false;
    std::optional<double> v;
    if (expected) {
      v = ratio ? ratio_in_round(*ratio, rows, row) : value_of(&row, c);
      if (!v) ++line.wrong;  // a value the row should have: the run did not write it
    }
    line.cells.push_back(v);
    line.expected.push_back(expected);
  }
  return line;
}

TableLine median_line(const std::vector<TableLine>& rounds, const std::string& variant, std::size_t columns) {
  TableLine line{0, variant, std::vector<std::optional<double>>(columns), std::vector<bool>(columns, false), 0};
  for (std::size_t c = 0; c < columns; ++c) {
    std::vector<double> values;
    for (const auto& r : rounds)
      if (r.variant == variant) {
        line.expected[c] = r.expected[c];
        if (r.cells[c]) values.push_back(*r.cells[c]);
      }
    if (!values.empty()) line.cells[c] = median(values);
  }
  return line;
}

void apply_check(const Check& check, std::size_t column, TableLine& line, std::vector<CheckOutcome>& out) {
  if (!line.expected[column] || (!check.variants.empty() && !listed(check.variants, line.variant))) return;
  CheckOutcome o{check.column, line.variant, line.round, line.cells[column], check.min, check.max, false};
  o.ok = o.value && (!check.min || *o.value >= *check.min) && (!check.max || *o.value <= *check.max);
  if (!o.ok) ++line.wrong;
  out.push_back(o);
}

std::string number_text(double v) {
  char text[64];
  if (!std::isfinite(v)) std::snprintf(text, sizeof text, "%g", v);
  else if (std::fabs(v) >= 1000 || (v == std::floor(v) && std::fabs(v) < 1e15)) std::snprintf(text, sizeof text, "%.0f", v);
  else if (std::fabs(v) >= 1) std::snprintf(text, sizeof text, "%.3f", v);
  else std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

std::string cell_text(const TableLine& line, std::size_t c) {
  if (!line.expected[c]) return "-";
  return line.cells[c] ? number_text(*line.cells[c]) : "missing";
}

std::string round_text(int round) { return round == 0 ? "median" : std::to_string(round); }

std::string bounds_text(const CheckOutcome& o) {
  std::string s;
  if (o.min) s += ">= " + number_text(*o.min);
  if (o.max) s += std::string(s.empty() ? "" : " and ") + "<= " + number_text(*o.max);
  return s;
}

nlohmann::json line_json(const Figures& f, const TableLine& line) {
  nlohmann::json values = nlohmann::json::object();
  for (std::size_t c = 0; c < f.columns.size(); ++c)
    if (line.expected[c]) values[f.columns[c]] = line.cells[c] ? nlohmann::json(*line.cells[c]) : nlohmann::json(nullptr);
  nlohmann::json j = {{"variant", line.variant}, {"values", values}, {"wrong", line.wrong}};
  if (line.round > 0) j["round"] = line.round;
  return j;
}

}  // namespace

std::optional<double> reduce_numbers(const std::vector<double>& n, Reduce reduce) {
  if (reduce == Reduce::kCount) return static_cast<double>(n.size());
  if (n.empty() || (reduce == Reduce::kOnly && n.size() != 1)) return std::nullopt;
  switch (reduce) {
    case Reduce::kLast: return n.back();
    case Reduce::kMin: return *std::min_element(n.begin(), n.end());
    case Reduce::kMax: return *std::max_element(n.begin(), n.end());
    case Reduce::kSum: return std::accumulate(n.begin(), n.end(), 0.0);
    case Reduce::kMean: return std::accumulate(n.begin(), n.end(), 0.0) / static_cast<double>(n.size());
    default: return n.front();  // kOnly (one number), kFirst
  }
}

std::optional<double> derive(const Reading& r, const std::map<std::string, double>& values) {
  const auto v = evaluate(r.expr, values);
  if (!v) return std::nullopt;
  return *v * r.scale;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool has_column(const BenchSpec& spec, const std::string& column, const std::string& variant) {
  for (const auto& r : spec.readings)
    if (r.name == column) return r.shown && (r.variants.empty() || listed(r.variants, variant));
  for (const auto& r : spec.ratios)
    if (r.name == column) return r.variants.empty() ? variant != r.baseline : listed(r.variants, variant);
  return false;
}

Figures compute_figures(const BenchSpec& spec, const std::vector<RunRow>& rows) {
  Figures f;
  for (const auto& r : spec.readings)
    if (r.shown) f.columns.push_back(r.name);
  for (const auto& r : spec.ratios) f.columns.push_back(r.name);
  int last_round = 0;
  for (const auto& r : rows) last_round = std::max(last_round, r.round);
  for (int round = 1; round <= last_round; ++round)
    for (const auto& v : spec.variants)
      if (const RunRow* row = find_row(rows, round, v.name)) f.rows.push_back(round_line(spec, f.columns, rows, *row));
  for (const auto& v : spec.variants)
    if (std::any_of(f.rows.begin(), f.rows.end(), [&](const TableLine& l) { return l.variant == v.name; }))
      f.medians.push_back(median_line(f.rows, v.name, f.columns.size()));
  for (const auto& check : spec.checks) {
    const std::size_t c = std::find(f.columns.begin(), f.columns.end(), check.column) - f.columns.begin();
    if (c == f.columns.size()) continue;  // a check on a hidden reading has no cell to bound
    for (auto& line : check.every_round ? f.rows : f.medians) apply_check(check, c, line, f.checks);
  }
  for (const auto* lines : {&f.rows, &f.medians})
    for (const auto& l : *lines) f.wrong += l.wrong;
  return f;
}

std::string format_table(const BenchSpec& spec, const Figures& f) {
  std::ostringstream s;
  s << "# " << spec.path << ": " << spec.about << "\n# " << spec.rounds << " round" << (spec.rounds == 1 ? "" : "s")
    << (spec.alternate ? ", the variants' order reversed in even rounds" : ", the variants in the spec's order");
  for (const auto& [k, v] : spec.options) s << "; " << k << "=" << v;
  std::size_t name_width = 7;
  for (const auto& l : f.medians) name_width = std::max(name_width, l.variant.size());
  std::vector<std::size_t> widths;
  for (const auto& c : f.columns) widths.push_back(std::max<std::size_t>(c.size(), 10));
  auto line_text = [&](const std::string& round, const std::string& variant, const std::vector<std::string>& cells,
                       const std::string& wrong) {
    char head[160];
    std::snprintf(head, sizeof head, "%8s  %-*s", round.c_str(), static_cast<int>(name_width), variant.c_str());
    std::string line = head;
    for (std::size_t c = 0; c < cells.size(); ++c)
      line += "  " + std::string(widths[c] - std::min(widths[c], cells[c].size()), ' ') + cells[c];
    return line + "  " + std::string(6 - std::min<std::size_t>(6, wrong.size()), ' ') + wrong + "\n";
  };
  std::string header = line_text("round", "variant", f.columns, "#wrong");
  header[0] = '#';  // a comment line for readers of the table, aligned with the rows below it
  s << "\n" << header;
  for (const auto* lines : {&f.rows, &f.medians})
    for (const auto& l : *lines) {
      std::vector<std::string> cells;
      for (std::size_t c = 0; c < f.columns.size(); ++c) cells.push_back(cell_text(l, c));
      s << line_text(round_text(l.round), l.variant, cells, std::to_string(l.wrong));
    }
  for (const auto& o : f.checks)
    s << "# check " << o.column << " of " << o.variant << " (" << (o.round ? "round " + round_text(o.round) : "median")
      << "): " << (o.value ? number_text(*o.value) : "missing") << ", bound " << bounds_text(o) << ": "
      << (o.ok ? "ok" : "WRONG") << "\n";
  s << "# wrong: " << f.wrong << (f.wrong ? " (values out of a check's bounds or missing)" : "") << "\n";
  return s.str();
}

nlohmann::json figures_json(const BenchSpec& spec, const Figures& f) {
  nlohmann::json j = {{"format", "shardtrain-compare"}, {"spec", spec.path},     {"about", spec.about},
                      {"rounds", spec.rounds},           {"options", spec.options}, {"columns", f.columns},
                      {"wrong", f.wrong}};
  j["rows"] = nlohmann::json::array();
  for (const auto& l : f.rows) j["rows"].push_back(line_json(f, l));
  j["medians"] = nlohmann::json::array();
  for (const auto& l : f.medians) j["medians"].push_back(line_json(f, l));
  j["checks"] = nlohmann::json::array();
  for (const auto& o : f.checks)
    j["checks"].push_back({{"column", o.column},
                           {"variant", o.variant},
                           {"round", o.round ? nlohmann::json(o.round) : nlohmann::json("median")},
                           {"value", o.value ? nlohmann::json(*o.value) : nlohmann::json(nullptr)},
                           {"min", o.min ? nlohmann::json(*o.min) : nlohmann::json(nullptr)},
                           {"max", o.max ? nlohmann::json(*o.max) : nlohmann::json(nullptr)},
                           {"ok", o.ok}});
  return j;
}

}  // namespace shardtrain::bench
