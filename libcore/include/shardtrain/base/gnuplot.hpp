// Plots drawn by gnuplot run as a child process (base/subprocess.hpp): each plot is a data file and
// a script left beside its SVG, so a reader can restyle and rerun it. Shared by the scaling report
// (scaling_plots.cpp) and the release evaluation's reliability diagram (release_report.hpp).
#pragma once
#include <string>

namespace shardtrain {

// The common head of every script: SVG of 720x460, no enhanced text (names carry '_'), a title, a grid.
std::string gnuplot_script_head(const std::string& svg_path, const std::string& title);

// Writes <dir>/<name>.dat and <dir>/<name>.gp, runs gnuplot on the script (its output in
// <name>.gnuplot.log); returns "<name>.svg". Throws IoError when a file cannot be written and Error
// (kFailure) naming the log when gnuplot fails. Call require_gnuplot() (scaling_report.hpp) first.
std::string draw_gnuplot(const std::string& dir, const std::string& name, const std::string& data,
                         const std::string& script);

// Throws UsageError when `dir` holds a quote or a line break (the scripts quote paths in '...').
void require_plain_plot_folder(const std::string& dir, const std::string& option);

}  // namespace shardtrain
