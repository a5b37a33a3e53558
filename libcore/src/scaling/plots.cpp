// The scaling report's plots (scaling_report.hpp): for each plot a data file and a gnuplot script
// left in the output folder (so a reader can restyle and rerun them), drawn to SVG by gnuplot run
// as a child process. Oversubscribed points get their own marker, colour, key entry and label in
// the efficiency and speedup plots and their group's name in the breakdown, so they are never read
// as hardware scaling; where no point is oversubscribed no plot mentions it.
#include <algorithm>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/base/gnuplot.hpp"
#include "shardtrain/scaling/report.hpp"

namespace shardtrain {
namespace {

constexpr const char* kGnuplotPackage = "gnuplot-nox";

bool any_oversubscribed(const ScalingReport& r) {
  for (const auto& p : r.points)
    if (p.oversubscribed) return true;
  return false;
}

// The point's label under its marker, e.g. "W=4 oversubscribed".
std::string point_label(const ScalingReport& r, std::size_t i) {
  return "W=" + std::to_string(r.runs[i].world_size) + (r.points[i].oversubscribed ? " oversubscribed" : "");
}

// efficiency.dat / speedup.dat: "W value oversubscribed label" per point; "-" rows never occur
// because these plots are only drawn with a W = 1 run (every point then has E and S).
std::string points_data(const ScalingReport& r, bool speedup) {
  std::ostringstream d;
  d << "# W " << (speedup ? "speedup" : "efficiency") << " oversubscribed label predicted ('?': no model)\n";
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const auto& predicted = r.points[i].predicted_efficiency;
    d << r.runs[i].world_size << " " << (speedup ? *r.points[i].speedup : *r.points[i].efficiency) << " "
      << (r.points[i].oversubscribed ? 1 : 0) << " \"" << point_label(r, i) << "\" ";
    if (predicted) d << (speedup ? *predicted * r.runs[i].world_size : *predicted) << "\n";
    else d << "?\n";
  }
  return d.str();
}

// Measured (filled circles, joined) and oversubscribed (open red squares, apart) points with a
// label each, over the ideal line. `ideal` is a gnuplot expression in x.
std::string points_script(const ScalingReport& r, const std::string& dir, const std::string& name, bool speedup) {
  int max_w = 1;
  double max_y = speedup ? 1 : 1.1;
  double min_y = 1;  // the speedup axis is logarithmic: its floor is the slowest point's, not 0
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    max_w = std::max(max_w, r.runs[i].world_size);
    const double y = speedup ? *r.points[i].speedup : *r.points[i].efficiency;
    max_y = std::max(max_y, y);
    if (y > 0) min_y = std::min(min_y, y);
  }
  if (speedup) max_y = std::max(max_y, double(max_w));
  const std::string dat = dir + "/" + name + ".dat";
  const std::string what = speedup ? "Speedup S(W) = throughput_W / throughput_1" : "Efficiency E(W) = throughput_W / (W x throughput_1)";
  std::ostringstream g;
  g << gnuplot_script_head(dir + "/" + name + ".svg", what + ", " + mode_name(r.mode) + " scaling")
    << "set xlabel 'W (ranks)'\nset ylabel '" << (speedup ? "S(W)" : "E(W)") << "'\n"
    << "set logscale x 2\nset xrange [0.8:" << max_w * 1.9 << "]\n";
  // Speedup on log-log axes, so that the ideal S(W) = W is the straight diagonal it is: over a
  // logarithmic W and a linear S it bends upward and reads as if ideal scaling were exponential.
  if (speedup)
    g << "set logscale y 2\nset yrange [" << min_y / 1.5 << ":" << max_y * 1.5 << "]\n";
  else
    g << "set yrange [0:" << max_y * 1.2 << "]\n";
  // Left-aligned titles after their samples: right-aligned ones left the box half empty.
  g << "set key top left box opaque Left reverse\nset datafile missing '?'\n"
    << "plot " << (speedup ? "x" : "1") << " with lines dt 2 lw 2 lc rgb 'gray40' title 'ideal',\\\n"
    << "  '" << dat << "' using 1:($3==0?$2:1/0) with linespoints pt 7 ps 1.3 lw 2 lc rgb '#1f77b4' title 'measured',\\\n";
  // The oversubscribed series (and its key entry) only where a point is oversubscribed: a key that
  // names a series the plot does not have sends the reader looking for it.
  if (any_oversubscribed(r))
    g << "  '" << dat << "' using 1:($3==1?$2:1/0) with points pt 4 ps 1.6 lw 2 lc rgb '#d62728' "
      << "title 'oversubscribed (ranks > CPUs): not hardware scaling',\\\n";
  // Labels above and right of their marker: below it, a point near E = 0 had its label on the
  // axis's tic labels; the x range leaves room for the widest ("W=8 oversubscribed").
  g << "  '" << dat << "' using 1:2:4 with labels left offset 0.8,0.9 font ',9' notitle";
  bool predicted = false;
  for (const auto& p : r.points) predicted = predicted || p.predicted_efficiency.has_value();
  if (predicted)
    g << ",\\\n  '" << dat << "' using 1:5 with linespoints dt 3 pt 6 ps 1.3 lw 2 lc rgb '#2ca02c' "
      << "title 'model prediction (scale-bench fit)'";
  g << "\n";
  return g.str();
}

// breakdown.dat: one block per W (gnuplot's `index`: blocks apart by two blank lines), one row per
// rank: its label ("r<rank>"), then the seconds of each section.
std::string breakdown_data(const ScalingReport& r) {
  std::ostringstream d;
  d << "# label";
  for (const char* s : kBreakdownNames) d << " " << s;
  d << "\n";
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    if (i) d << "\n\n";
    d << "# " << point_label(r, i) << "\n";
    for (int rank = 0; rank < r.runs[i].world_size; ++rank) {
      d << "\"r" << rank << "\"";
      for (double s : r.runs[i].ranks[std::size_t(rank)].section_s) d << " " << s;
      d << "\n";
    }
  }
  return d.str();
}

// One fixed colour per section, the same in every W's group (gnuplot would move on to the next
// line type at each group otherwise).
constexpr const char* kSectionColours[kBreakdownSections] = {"#9467bd", "#2ca02c", "#1f77b4", "#ff7f0e",
                                                             "#e6c229", "#17becf", "#7f7f7f"};

// Stacked bars, one per rank labelled "r<rank>" (short and horizontal: rotated per-bar labels
// such as "W=4 r3 oversub" ran into each other and were cut), grouped by W with the group's name
// ("W=4", "W=4 oversubscribed") under its bars and a bar's width of space between groups.
std::string breakdown_script(const ScalingReport& r, const std::string& dir) {
  const bool any_over = any_oversubscribed(r);
  const std::string dat = dir + "/breakdown.dat";
  int bars = 0;
  for (const auto& run : r.runs) bars += run.world_size;
  std::ostringstream g;
  g << gnuplot_script_head(dir + "/breakdown.svg",
                   std::string("Per-rank median step by section, per W") +
                       (any_over ? " (oversubscribed = more ranks than CPUs: not hardware scaling)" : ""))
    << "set ylabel 'median seconds per step'\nset grid noxtics ytics\n"
    << "set style data histograms\nset style histogram rowstacked title offset 0,-0.3\n"
    << "set style fill solid 0.85 border -1\nset boxwidth 0.75\nset xtics nomirror font ',10'\n"
    << "set key outside right\nset yrange [0:*]\nset bmargin 4\n"
    << "set xrange [-0.8:" << bars + int(r.runs.size()) - 1 - 0.2 << "]\n"
    << "plot ";
  int at = 0;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    g << (i ? ",\\\n  " : "") << "newhistogram \"" << point_label(r, i) << "\" at " << at;
    for (int c = 0; c < kBreakdownSections; ++c) {
      g << ",\\\n  '" << dat << "' index " << i << " using " << c + 2 << (c == 0 ? ":xtic(1)" : "") << " lc rgb '"
        << kSectionColours[c] << "' ";
      if (i == 0) g << "title '" << kBreakdownNames[c] << "'";
      else g << "notitle";
    }
    at += r.runs[i].world_size + 1;
  }
  g << "\n";
  return g.str();
}

}  // namespace

void require_gnuplot() {
  if (find_on_path("gnuplot").empty())
    throw Error(ExitCode::kFailure, std::string("gnuplot not found on PATH: the report's plots need it; install the "
                                                "Debian package ") + kGnuplotPackage + " (apt-get install " +
                                                kGnuplotPackage + ")");
}

std::vector<std::string> write_scaling_plots(const ScalingReport& report, const std::string& out_dir) {
  require_gnuplot();
  // The scripts quote paths in '...': a quote or a line break in the folder would end the string.
  require_plain_plot_folder(out_dir, "--out");
  std::vector<std::string> svgs;
  if (report.has_base) {  // E and S are defined against W = 1 only
    svgs.push_back(draw_gnuplot(out_dir, "efficiency", points_data(report, false), points_script(report, out_dir, "efficiency", false)));
    svgs.push_back(draw_gnuplot(out_dir, "speedup", points_data(report, true), points_script(report, out_dir, "speedup", true)));
  }
  svgs.push_back(draw_gnuplot(out_dir, "breakdown", breakdown_data(report), breakdown_script(report, out_dir)));
  return svgs;
}

}  // namespace shardtrain
