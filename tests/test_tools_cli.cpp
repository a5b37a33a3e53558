// Every tool: --help and the man page stay in step (each long option in the usage text is
// documented in man/man1/<tool>.1), --version works, and an invalid option exits 2.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "test_support.hpp"

namespace {
std::string run_capture(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int raw = pclose(p);
  *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}
}  // namespace

TEST_CASE("each tool's --help options are all in its man page and bad options exit 2", "[tools][cli]") {
  const std::string tools_dir = std::string(SHARDTRAIN_SOURCE_DIR) + "/tools";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(tools_dir)) {
    if (entry.path().extension() != ".cpp") continue;
    const std::string tool = entry.path().stem().string();
    INFO("tool " << tool);
    int status = 0;
    const std::string help = run_capture(shardtrain::test::tool_path(tool) + " --help", &status);
    CHECK(status == 0);
    std::string man = shardtrain::test::file_contents(std::string(SHARDTRAIN_SOURCE_DIR) + "/man/man1/" + tool + ".1");
    REQUIRE_FALSE(man.empty());
    man.erase(std::remove(man.begin(), man.end(), '\\'), man.end());  // troff escapes: \-\- -> --
    std::set<std::string> options;
    const std::regex option_re("(--[a-z][a-z0-9-]*)");
    for (std::sregex_iterator it(help.begin(), help.end(), option_re), end; it != end; ++it) options.insert((*it)[1]);
    // A tool with subcommands (its usage line ends in SUBCOMMAND: scale-bench, release-gate...; or in
    // [SUBCOMMAND] when the tool also runs without one: pipeline and its cycles): each subcommand's
    // options are in the page too. CLI11 titles the list "Subcommands:"; a tool that takes
    // subcommands must have it, so a change of that title fails here instead of silently skipping
    // the subcommands.
    const bool optional_subcommand = help.find("[SUBCOMMAND]\n") != std::string::npos;
    const bool takes_subcommands = optional_subcommand || help.find("SUBCOMMAND\n") != std::string::npos;
    auto subcommands_at = help.find("Subcommands:");
    if (subcommands_at == std::string::npos) subcommands_at = help.find("SUBCOMMANDS:");
    CHECK((subcommands_at != std::string::npos) == takes_subcommands);
    if (subcommands_at != std::string::npos) {
      std::istringstream lines(help.substr(subcommands_at));
      std::string line;
      std::getline(lines, line);
      const std::regex sub_re("^  ([a-z][a-z0-9-]*)\\b.*");
      std::smatch m;
      int subcommands = 0;
      while (std::getline(lines, line) && !line.empty()) {
        if (!std::regex_match(line, m, sub_re)) continue;  // a wrapped description line
        const std::string sub_help = run_capture(shardtrain::test::tool_path(tool) + " " + m[1].str() + " --help", &status);
        CHECK(status == 0);
        for (std::sregex_iterator it(sub_help.begin(), sub_help.end(), option_re), end; it != end; ++it)
          options.insert((*it)[1]);
        ++subcommands;
      }
      CHECK(subcommands > (optional_subcommand ? 0 : 1));  // one subcommand beside the tool's own job
    }
    CHECK(options.size() > 1);
    for (const auto& opt : options) {
      INFO("option " << opt);
      CHECK(man.find(opt) != std::string::npos);
    }
    run_capture(shardtrain::test::tool_path(tool) + " --no-such-option-xyz", &status);
    CHECK(status == 2);
    run_capture(shardtrain::test::tool_path(tool) + " --version", &status);
    CHECK(status == 0);
    ++checked;
  }
  CHECK(checked >= 2);
}
