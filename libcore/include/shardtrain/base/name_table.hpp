// An enum's names, written once as a table of {name, value} pairs beside the enum (kCauseNames,
// kVerdictClassNames, ...), read both ways here, so no switch statement repeats the table.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace shardtrain {

// The name of `value` in `table`; "?" for a value the table lacks.
template <typename Enum, std::size_t N>
const char* name_in(const std::pair<const char*, Enum> (&table)[N], Enum value) {
  for (const auto& [name, v] : table)
    if (v == value) return name;
  return "?";
}

// The value named `name` in `table`; nothing for an unknown name.
template <typename Enum, std::size_t N>
std::optional<Enum> value_named(const std::pair<const char*, Enum> (&table)[N], std::string_view name) {
  for (const auto& [n, v] : table)
    if (name == n) return v;
  return std::nullopt;
}

}  // namespace shardtrain
