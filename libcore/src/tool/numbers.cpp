#include "shardtrain/tool/numbers.hpp"

#include "shardtrain/base/number_text.hpp"


namespace shardtrain {
namespace {

// The name of the marker validator allow_negative() adds (a no-op: CLI11 has no other per-option tag).
constexpr const char* kAllowNegative = "shardtrain-allow-negative";

bool marked_negative_ok(CLI::Option* option) {
  try {
    option->get_validator(kAllowNegative);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

// The CLI11 type of an option: "INT", "UINT", "FLOAT", ... (its type name up to the validators').
std::string base_type(const CLI::Option* option) {
  const std::string full = option->get_type_name();
  return full.substr(0, full.find_first_of(": "));
}

}  // namespace

std::string strict_number_problem(const std::string& text, const std::string& type, bool negative_ok) {
  const NumberKind kind = type == "FLOAT" ? NumberKind::kReal : type == "UINT" ? NumberKind::kUnsigned : NumberKind::kSigned;
  return shardtrain::strict_number_problem(text, kind, negative_ok);
}

CLI::Option* allow_negative(CLI::Option* option) {
  return option->check(CLI::Validator([](std::string&) { return std::string(); }, "", kAllowNegative));
}

void check_numbers_strictly(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = base_type(option);
    if (type != "INT" && type != "UINT" && type != "FLOAT") continue;
    const bool negative_ok = marked_negative_ok(option);
    option->check(CLI::Validator(
        [type, negative_ok](std::string& text) { return strict_number_problem(text, type, negative_ok); }, ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_numbers_strictly(*sub);
}

}  // namespace shardtrain
