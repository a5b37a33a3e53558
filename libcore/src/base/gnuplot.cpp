#include "shardtrain/base/gnuplot.hpp"

#include <fstream>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"

namespace shardtrain {
namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.flush()) throw IoError(path + ": cannot write");
}

}  // namespace

std::string gnuplot_script_head(const std::string& svg, const std::string& title) {
  std::ostringstream g;
  g << "set terminal svg size 720,460 dynamic font 'sans,11'\n"
    << "set termoption noenhanced\n"
    << "set output '" << svg << "'\n"
    << "set title \"" << title << "\"\n"
    << "set grid\n";
  return g.str();
}

std::string draw_gnuplot(const std::string& dir, const std::string& name, const std::string& data,
                         const std::string& script) {
  write_text(dir + "/" + name + ".dat", data);
  const std::string gp = dir + "/" + name + ".gp";
  write_text(gp, script);
  const std::string log = dir + "/" + name + ".gnuplot.log";
  const int rc = run_child({"gnuplot", gp}, log);
  if (rc != 0) throw Error(ExitCode::kFailure, "gnuplot failed on " + gp + " (exit " + std::to_string(rc) + "); see " + log);
  return name + ".svg";
}

void require_plain_plot_folder(const std::string& dir, const std::string& option) {
  if (dir.find_first_of("'\n") != std::string::npos)
    throw UsageError(option + " " + dir + ": a folder name with a quote or a line break cannot go into a gnuplot script");
}

}  // namespace shardtrain
