// Command-line options that stand for an enum (--device, --precision, --transport, --allreduce):
// parsed once, here in the tool layer, from the library's one table of each enum's names, with
// one message for a wrong name. Private to the tool layer.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace shardtrain {

// One value of an option that stands for an enum: its name on the command line and the value.
template <typename T>
struct Choice {
  const char* name;
  T value;
};

// Adds `flag` bound to `target`, an enum (or an optional one, where "auto" is unset): the name is
// parsed here, once, so the library never sees a string for it. Any other name is refused while
// parsing, as "<flag>: '<name>' is not one of a, b, c" (a usage error: exit 2); --help shows the
// names and the default.
template <typename T>
CLI::Option* add_choice_option(CLI::App& app, const std::string& flag, T& target, std::vector<Choice<T>> choices,
                               const std::string& help) {
  std::string names, braces, default_name;
  for (const Choice<T>& c : choices) {
    names += (names.empty() ? "" : ", ") + std::string(c.name);
    braces += (braces.empty() ? "" : ",") + std::string(c.name);
    if (c.value == target) default_name = c.name;
  }
  const CLI::Validator known(
      [choices, names](std::string& text) -> std::string {
        for (const Choice<T>& c : choices)
          if (text == c.name) return "";
        return "'" + text + "' is not one of " + names;
      },
      "{" + braces + "}");
  return app
      .add_option_function<std::string>(
          flag,
          [&target, choices](const std::string& text) {
            for (const Choice<T>& c : choices)
              if (text == c.name) target = c.value;
          },
          help)
      ->check(known)
      ->default_str(default_name);
}

// The choices of an enum from the library's table of its names (kPrecisionNames, ...), after any
// choices of the option's own ("auto" for an optional enum).
template <typename T, typename Table>
std::vector<Choice<T>> choices_of(const Table& table, std::vector<Choice<T>> first = {}) {
  for (const auto& [name, value] : table) first.push_back({name, T(value)});
  return first;
}

}  // namespace shardtrain
