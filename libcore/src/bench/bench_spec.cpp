#include "shardtrain/bench/bench_spec.hpp"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/bench/bench_expr.hpp"
#include "bench_spec_check.hpp"

namespace shardtrain::bench {
namespace {

namespace jf = json_fields;
using jf::field;

// A field the reader does not know is refused by name: a misspelt "every_rounds" would otherwise
// turn a check off without a word.
void only_fields(const JsonFile& f, const std::string& at, const std::set<std::string>& known) {
  jf::require_object(f, at);
  for (const auto& [key, value] : f.at(at).items())
    if (!known.count(key)) f.fail("field " + field(at, key) + " is not a field of the benchmark spec here");
}

std::string optional_string(const JsonFile& f, const std::string& pointer, const std::string& otherwise) {
  return f.has(pointer) ? f.string(pointer) : otherwise;
}

std::vector<std::string> optional_strings(const JsonFile& f, const std::string& pointer) {
  return f.has(pointer) ? jf::strings(f, pointer) : std::vector<std::string>{};
}

std::map<std::string, std::string> string_map(const JsonFile& f, const std::string& pointer) {
  std::map<std::string, std::string> out;
  if (!f.has(pointer)) return out;
  jf::require_object(f, pointer);
  for (const auto& [key, value] : f.at(pointer).items()) out[key] = f.string(field(pointer, key));
  return out;
}

std::vector<std::string> command_of(const JsonFile& f, const std::string& pointer) {
  auto command = jf::strings(f, pointer);
  if (command.empty()) f.fail("field " + pointer + " is an empty command");
  return command;
}

Variant read_variant(const JsonFile& f, const std::string& at) {
  only_fields(f, at, {"name", "command", "when", "exit", "kill", "cleanup", "timeout_s"});
  Variant v;
  v.name = f.string(field(at, "name"));
  v.command = command_of(f, field(at, "command"));
  v.when = optional_string(f, field(at, "when"), "");
  if (f.has(field(at, "exit"))) {
    v.exit_ok.clear();
    for (std::size_t i = 0, n = jf::array_size(f, field(at, "exit")); i < n; ++i)
      v.exit_ok.push_back(jf::small_integer(f, field(field(at, "exit"), std::to_string(i))));
  }
  if (f.has(field(at, "kill"))) {
    const std::string k = field(at, "kill");
    only_fields(f, k, {"file", "after_step"});
    v.kill = KillRule{f.string(field(k, "file")), jf::integer(f, field(k, "after_step"))};
  }
  if (f.has(field(at, "cleanup"))) v.cleanup = command_of(f, field(at, "cleanup"));
  if (f.has(field(at, "timeout_s"))) v.timeout_s = f.number(field(at, "timeout_s"));
  if (v.timeout_s <= 0) f.fail("field " + field(at, "timeout_s") + " must be above 0");
  return v;
}

Reduce reduce_of(const JsonFile& f, const std::string& pointer) {
  static const std::map<std::string, Reduce> names = {
      {"only", Reduce::kOnly}, {"first", Reduce::kFirst}, {"last", Reduce::kLast}, {"min", Reduce::kMin},
      {"max", Reduce::kMax},   {"sum", Reduce::kSum},     {"mean", Reduce::kMean}, {"count", Reduce::kCount}};
  if (!f.has(pointer)) return Reduce::kOnly;
  const auto it = names.find(f.string(pointer));
  if (it == names.end()) f.fail("field " + pointer + " is not one of only, first, last, min, max, sum, mean, count");
  return it->second;
}

// The kind is given by which of pointer, regex, wall, bytes, derived the reading has (exactly one).
void read_reading_source(const JsonFile& f, const std::string& at, Reading& r) {
  int kinds = 0;
  if (f.has(field(at, "pointer"))) {
    ++kinds;
    r.kind = ReadingKind::kJson;
    r.pointer = f.string(field(at, "pointer"));
    r.file = optional_string(f, field(at, "file"), "summary.json");
  }
  if (f.has(field(at, "regex"))) {
    ++kinds;
    r.kind = ReadingKind::kRegex;
    r.regex = f.string(field(at, "regex"));
    try {
      std::regex check(r.regex);
    } catch (const std::regex_error& e) {
      f.fail("field " + field(at, "regex") + " is not a regular expression (" + e.what() + ")");
    }
    r.file = optional_string(f, field(at, "file"), "{log}");
  }
  if (f.has(field(at, "wall"))) {
    ++kinds;
    r.kind = ReadingKind::kWall;
    if (!jf::boolean(f, field(at, "wall"))) f.fail("field " + field(at, "wall") + " can only be true");
  }
  if (f.has(field(at, "bytes"))) {
    ++kinds;
    r.kind = ReadingKind::kBytes;
    r.file = f.string(field(at, "bytes"));
  }
  if (f.has(field(at, "derived"))) {
    ++kinds;
    r.kind = ReadingKind::kDerived;
    r.expr = f.string(field(at, "derived"));
    try {
      expression_names(r.expr);
    } catch (const UsageError& e) {
      f.fail("field " + field(at, "derived") + ": " + e.what());
    }
  }
  if (kinds != 1) f.fail("reading " + at + " needs exactly one of pointer, regex, wall, bytes, derived");
  if (r.kind != ReadingKind::kJson && r.kind != ReadingKind::kRegex && f.has(field(at, "file")))
    f.fail("field " + field(at, "file") + " is for pointer and regex readings");
}

Reading read_reading(const JsonFile& f, const std::string& at) {
  only_fields(f, at, {"name", "pointer", "regex", "wall", "bytes", "derived", "file", "reduce", "where", "scale",
                      "variants", "show"});
  Reading r;
  r.name = f.string(field(at, "name"));
  read_reading_source(f, at, r);
  r.reduce = reduce_of(f, field(at, "reduce"));
  if (f.has(field(at, "where"))) {
    const std::string w = field(at, "where");
    only_fields(f, w, {"pointer", "equals"});
    if (r.pointer.find("/*") == std::string::npos) f.fail("field " + w + " needs a pointer with a \"*\" segment");
    r.where = Where{f.string(field(w, "pointer")), f.string(field(w, "equals"))};
  }
  if (f.has(field(at, "scale"))) r.scale = f.number(field(at, "scale"));
  r.variants = optional_strings(f, field(at, "variants"));
  if (f.has(field(at, "show"))) r.shown = jf::boolean(f, field(at, "show"));
  return r;
}

Ratio read_ratio(const JsonFile& f, const std::string& at) {
  only_fields(f, at, {"name", "reading", "baseline", "over", "variants", "scale"});
  Ratio r;
  r.name = f.string(field(at, "name"));
  r.reading = f.string(field(at, "reading"));
  r.baseline = f.string(field(at, "baseline"));
  r.over = optional_string(f, field(at, "over"), r.reading);
  r.variants = optional_strings(f, field(at, "variants"));
  if (f.has(field(at, "scale"))) r.scale = f.number(field(at, "scale"));
  return r;
}

Check read_check(const JsonFile& f, const std::string& at) {
  only_fields(f, at, {"column", "variants", "min", "max", "every_round"});
  Check c;
  c.column = f.string(field(at, "column"));
  c.variants = optional_strings(f, field(at, "variants"));
  c.min = f.find_number(field(at, "min"));
  c.max = f.find_number(field(at, "max"));
  if (!c.min && !c.max) f.fail("check " + at + " needs min or max");
  if (f.has(field(at, "every_round"))) c.every_round = jf::boolean(f, field(at, "every_round"));
  return c;
}

template <typename T, typename Read>
std::vector<T> read_list(const JsonFile& f, const std::string& pointer, Read read) {
  std::vector<T> out;
  if (!f.has(pointer)) return out;
  for (std::size_t i = 0, n = jf::array_size(f, pointer); i < n; ++i) out.push_back(read(f, field(pointer, std::to_string(i))));
  return out;
}

}  // namespace

const Variant* BenchSpec::variant(const std::string& name) const {
  for (const auto& v : variants)
    if (v.name == name) return &v;
  return nullptr;
}

const Reading* BenchSpec::reading(const std::string& name) const {
  for (const auto& r : readings)
    if (r.name == name) return &r;
  return nullptr;
}

BenchSpec parse_bench_spec(const JsonFile& f) {
  only_fields(f, "", {"about", "rounds", "order", "options", "args", "env", "setup", "variants", "readings", "ratios",
                      "checks"});
  BenchSpec s;
  s.path = f.path();
  s.about = f.string("/about");
  if (f.has("/rounds")) s.rounds = jf::small_integer(f, "/rounds");
  if (s.rounds < 1) f.fail("field /rounds must be at least 1");
  const std::string order = optional_string(f, "/order", "fixed");
  if (order != "fixed" && order != "alternate") f.fail("field /order is \"fixed\" or \"alternate\", not \"" + order + "\"");
  s.alternate = order == "alternate";
  s.options = string_map(f, "/options");
  if (f.has("/args")) {
    jf::require_object(f, "/args");
    for (const auto& [key, value] : f.at("/args").items()) s.arg_lists[key] = jf::strings(f, field("/args", key));
  }
  s.env = string_map(f, "/env");
  s.setup = read_list<SetupStep>(f, "/setup", [](const JsonFile& file, const std::string& at) {
    only_fields(file, at, {"command", "when"});
    return SetupStep{command_of(file, field(at, "command")), optional_string(file, field(at, "when"), "")};
  });
  s.variants = read_list<Variant>(f, "/variants", read_variant);
  if (s.variants.empty()) f.fail("field /variants must name at least one variant");
  s.readings = read_list<Reading>(f, "/readings", read_reading);
  s.ratios = read_list<Ratio>(f, "/ratios", read_ratio);
  s.checks = read_list<Check>(f, "/checks", read_check);
  check_names(f, s);
  check_placeholders(f, s);
  return s;
}

// "include": ["common.json"]: files (relative to the spec's folder) of shared options, argument
// lists and environment, merged under the spec's own (the spec's entry wins on a name given in both).
BenchSpec read_bench_spec(const std::string& path) {
  const JsonFile spec = JsonFile::read(path, "the benchmark spec");
  if (!spec.has("/include")) return parse_bench_spec(spec);
  nlohmann::json merged = spec.json();
  merged.erase("include");
  const auto includes = jf::strings(spec, "/include");
  for (const auto& name : includes) {
    const std::string file = (std::filesystem::path(path).parent_path() / name).string();
    const JsonFile shared = JsonFile::read(file, "the benchmark spec's include");
    only_fields(shared, "", {"options", "args", "env"});
    for (const char* part : {"options", "args", "env"}) {
      if (!shared.has(std::string("/") + part)) continue;
      jf::require_object(shared, std::string("/") + part);
      for (const auto& [key, value] : shared.json()[part].items())
        if (!merged[part].contains(key)) merged[part][key] = value;
    }
  }
  return parse_bench_spec(JsonFile::parse(merged.dump(), path, "the benchmark spec (with its includes)"));
}

void apply_setting(BenchSpec& spec, const std::string& key_value) {
  const auto eq = key_value.find('=');
  if (eq == std::string::npos) throw UsageError("--set " + key_value + ": give KEY=VALUE");
  const std::string key = key_value.substr(0, eq);
  if (!spec.options.count(key)) {
    std::string known;
    for (const auto& [k, v] : spec.options) known += (known.empty() ? "" : ", ") + k;
    throw UsageError("--set " + key + ": " + spec.path + " has no option " + key + " (its options: " +
                     (known.empty() ? "none" : known) + ")");
  }
  spec.options[key] = key_value.substr(eq + 1);
}

Places places_for(const BenchSpec& spec, const std::string& bin, const std::string& data, const std::string& work,
                  int round, const std::string& variant) {
  Places p = spec.options;
  const std::string round_dir = work + "/r" + std::to_string(round);
  p["bin"] = bin, p["data"] = data, p["work"] = work, p["round"] = std::to_string(round);
  std::error_code ec;
  p["cwd"] = std::filesystem::current_path(ec).string();
  // The spec's own folder, so that a spec names the clone's files (bench/torch_peer.py) from wherever it is run.
  p["spec_dir"] = std::filesystem::absolute(spec.path, ec).lexically_normal().parent_path().string();
  p["run"] = round_dir + "/" + variant;
  p["log"] = round_dir + "/" + variant + ".log";
  for (const auto& v : spec.variants) p["run:" + v.name] = round_dir + "/" + v.name;
  return p;
}

std::string expand(const std::string& text, const Places& places, const std::string& where) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto open = text.find('{', i);
    if (open == std::string::npos) break;
    const auto close = text.find('}', open);
    if (close == std::string::npos) throw UsageError(where + ": \"" + text + "\" has a '{' without its '}'");
    const std::string name = text.substr(open + 1, close - open - 1);
    const auto it = places.find(name);
    if (it == places.end()) throw UsageError(where + ": unknown placeholder {" + name + "} in \"" + text + "\"");
    out += text.substr(i, open - i) + it->second;
    i = close + 1;
  }
  return out + text.substr(std::min(i, text.size()));
}

namespace {

// "@NAME" arguments replaced by the list NAME, whose own "@" arguments are replaced in turn (a
// shared shape inside a spec's list); a list that reaches itself is refused rather than looping.
void splice(const BenchSpec& spec, const std::vector<std::string>& args, const Places& places, const std::string& where,
            std::vector<std::string>& out, int depth) {
  if (depth > 8) throw UsageError(where + ": argument lists nested more than 8 deep (a list that includes itself?)");
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string at = where + "/" + std::to_string(i);
    const std::string arg = expand(args[i], places, at);
    if (arg.size() < 2 || arg[0] != '@') {
      out.push_back(arg);
      continue;
    }
    const auto list = spec.arg_lists.find(arg.substr(1));
    if (list == spec.arg_lists.end()) throw UsageError(at + ": no argument list \"" + arg.substr(1) + "\" in /args");
    splice(spec, list->second, places, "/args/" + list->first, out, depth + 1);
  }
}

}  // namespace

std::vector<std::string> expand_command(const BenchSpec& spec, const std::vector<std::string>& command,
                                        const Places& places, const std::string& where) {
  std::vector<std::string> out;
  splice(spec, command, places, where, out, 0);
  return out;
}

std::vector<const Variant*> round_order(const BenchSpec& spec, int round) {
  std::vector<const Variant*> out;
  for (const auto& v : spec.variants) {
    const auto it = spec.options.find(v.when);
    if (v.when.empty() || (it != spec.options.end() && !it->second.empty())) out.push_back(&v);
  }
  if (spec.alternate && round % 2 == 0) std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace shardtrain::bench
