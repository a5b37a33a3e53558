#include "command.hpp"

#include <cctype>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"

namespace shardtrain::slurm::detail {
namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

}  // namespace

std::vector<std::string> Answer::lines() const {
  std::vector<std::string> out_lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (std::string t = trimmed(line); !t.empty()) out_lines.push_back(std::move(t));
  return out_lines;
}

std::string Answer::said() const { return trimmed(out); }

Answer run(const std::vector<std::string>& argv, bool stderr_too) {
  Answer a;
  if (find_on_path(argv.at(0)).empty()) {
    a.out = argv[0] + " not found (not on a Slurm node, or not on PATH)";
    return a;
  }
  try {
    const ChildOutput child = run_child_captured(argv, stderr_too);
    a.ran = true;
    a.status = child.status;
    a.out = child.out;
  } catch (const Error& e) {
    a.out = e.what();
  }
  return a;
}

Answer run_checked(const std::vector<std::string>& argv, bool stderr_too) {
  Answer a = run(argv, stderr_too);
  if (!a.ran) throw IoError(command_text(argv) + ": " + a.out);
  if (a.status != 0)
    throw IoError(command_text(argv) + " exited " + std::to_string(a.status) + (a.said().empty() ? "" : ": " + a.said()));
  return a;
}

std::string joined(const std::vector<std::string>& words, const std::string& sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

}  // namespace shardtrain::slurm::detail
