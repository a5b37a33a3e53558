// The scaling report's plots (scaling_report.hpp): for each plot a data file and a gnuplot script
// left in the output folder (so a reader can restyle and rerun them), drawn to SVG by gnuplot run
// as a child process. Oversubscribed points get their own marker, colour, key entry and label in
// every plot, so they are never read as hardware scaling.
#include <algorithm>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/base/gnuplot.hpp"
#include "shardtrain/scaling/report.hpp"

namespace shardtrain {
namespace {

constexpr const char* kGnuplotPackage = "gnuplot-nox";

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
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    max_w = std::max(max_w, r.runs[i].world_size);
    max_y = std::max(max_y, speedup ? *r.points[i].speedup : *r.points[i].efficiency);
  }
  if (speedup) max_y = std::max(max_y, double(max_w));
  const std::string dat = dir + "/" + name + ".dat";
  const std::string what = speedup ? "Speedup S(W) = throughput_W / throughput_1" : "Efficiency E(W) = throughput_W / (W x throughput_1)";
  std::ostringstream g;
  g << gnuplot_script_head(dir + "/" + name + ".svg", what + ", " + mode_name(r.mode) + " scaling")
    << "set xlabel 'W (ranks)'\nset ylabel '" << (speedup ? "S(W)" : "E(W)") << "'\n"
    << "set logscale x 2\nset xrange [0.8:" << max_w * 1.3 << "]\nset yrange [0:" << max_y * 1.2 << "]\n"
    << "set key top left box opaque\nset datafile missing '?'\n"
    << "plot " << (speedup ? "x" : "1") << " with lines dt 2 lw 2 lc rgb 'gray40' title 'ideal',\\\n"
    << "  '" << dat << "' using 1:($3==0?$2:1/0) with linespoints pt 7 ps 1.3 lw 2 lc rgb '#1f77b4' title 'measured',\\\n"
    << "  '" << dat << "' using 1:($3==1?$2:1/0) with points pt 4 ps 1.6 lw 2 lc rgb '#d62728' "
    << "title 'oversubscribed (ranks > CPUs): not hardware scaling',\\\n"
    << "  '" << dat << "' using 1:2:4 with labels offset 0,-1.3 font ',9' notitle";
  bool predicted = false;
  for (const auto& p : r.points) predicted = predicted || p.predicted_efficiency.has_value();
  if (predicted)
    g << ",\\\n  '" << dat << "' using 1:5 with linespoints dt 3 pt 6 ps 1.3 lw 2 lc rgb '#2ca02c' "
      << "title 'model prediction (scale-bench fit)'";
  g << "\n";
  return g.str();
}

// breakdown.dat: one row per (W, rank): its label, then the seconds of each section.
std::string breakdown_data(const ScalingReport& r) {
  std::ostringstream d;
  d << "# label";
  for (const char* s : kBreakdownNames) d << " " << s;
  d << "\n";
  for (std::size_t i = 0; i < r.points.size(); ++i)
    for (int rank = 0; rank < r.runs[i].world_size; ++rank) {
      d << "\"W=" << r.runs[i].world_size << " r" << rank << (r.points[i].oversubscribed ? " oversub" : "") << "\"";
      for (double s : r.runs[i].ranks[std::size_t(rank)].section_s) d << " " << s;
      d << "\n";
    }
  return d.str();
}

std::string breakdown_script(const ScalingReport& r, const std::string& dir) {
  bool any_over = false;
  for (const auto& p : r.points) any_over = any_over || p.oversubscribed;
  const std::string dat = dir + "/breakdown.dat";
  std::ostringstream g;
  g << gnuplot_script_head(dir + "/breakdown.svg",
                   std::string("Per-rank median step by section, per W") +
                       (any_over ? " (oversub = more ranks than CPUs: not hardware scaling)" : ""))
    << "set ylabel 'median seconds per step'\n"
    << "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border -1\n"
    << "set boxwidth 0.7\nset xtics rotate by -35 font ',9'\nset key outside right\nset yrange [0:*]\n"
    << "plot ";
  for (int c = 0; c < kBreakdownSections; ++c)
    g << (c ? ",\\\n  " : "") << "'" << dat << "' using " << c + 2 << (c == 0 ? ":xtic(1)" : "") << " title '"
      << kBreakdownNames[c] << "'";
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
