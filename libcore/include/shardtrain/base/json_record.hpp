// A serialised type declares its fields once (issue 48: every to_json/from_json pair spelled each
// key twice, and the two drifted). The type has
//
//   static auto fields() {
//     using namespace json_fields;
//     return std::tuple{key("hostname", &HostInfo::hostname), key("cpus", &HostInfo::cpus)};
//   }
//
// and json_fields::write(value) / json_fields::read<T>(file, pointer) walk that one list in both
// directions. The member's type chooses the reader of json_fields.hpp, so the errors are theirs,
// naming the file and the field by its JSON pointer:
//   double: JsonFile::number    std::int64_t: integer    std::uint64_t: count    int: small_integer
//   bool: boolean    std::string: JsonFile::string    nlohmann::json: any value, kept as it is
//   std::vector<X>: an array    std::map<std::string, X>: an object    a type with fields(): an
//   object read by its list    a type with to_json()/from_json(f, pointer): those
//   std::optional<X>: null is none, written as null (the key must be present, unless kMayBeAbsent)
// Writing gives each value to nlohmann::json as it is, so an integer member stays a JSON integer
// and a double a JSON float, as the hand-written writers did.
//
// Entries:
//   key(NAME, &T::m [, codec] [, presence])  one key. codec: a reader (f, pointer) -> value for
//                           the member's (or optional's) value type, or names(kTable) for an enum,
//                           or in(range) for a number; presence: see Presence.
//   inlined(&T::m)          m's own fields at this object's level (dp's CommStats inside
//                           "communication"); an optional m is written only when set and read when
//                           the first key of its list is present.
//   written(NAME, &T::f)    written from a const member function, never read (a derived figure).
//   format_tag(NAME, VALUE, WHAT)  a file's "format" string: written, and read back as that value
//                           or refused: "field /format is not \"VALUE\": not a WHAT".
//   version(NAME, N)        a format version: written, read back as N or refused ("is 2, not 1").
//   constant(NAME, VALUE)   written as VALUE, never read.
//   group(NAME, ENTRIES...) members of this type in an object of their own ("holdout": {"documents",
//                           "samples", "slices"}).
//   when(PRED, ENTRIES...)  entries at this level written only when PRED(value) holds (a member
//                           function or a callable), read when the first entry's key is present
//                           (a ZeRO run's "zero_stage" and "formula_model_state").
//   written_by(NAME, F)     as written, from a callable F(const T&) (a figure with an argument).
//   unless_default(key(...)) a key written only while its member differs from its default (M{}, so
//                           M needs ==) and read as kMayBeAbsent: a step model's unknown link, an
//                           empty map of per-operation links.
// kOmittedWhenEmpty on a container (a vector, a map, a string) leaves it out when empty.
// A std::map<int, X> is an object keyed by the decimal int, >= 0 (a rank: "peers": {"1": ...}); codec
// keyed_by(&X::name, LIST) writes a std::vector<X> as an object keyed by each element's name
// member, each by the entries of LIST (a tuple, as fields() returns; the name is not among them):
// "levels": {"dp.node": {...}}; read back in key order.
// write_fields/read_fields take a list of the caller's (a part written only on request).
// Checks beyond the types (a range across fields, a "format" tag) go in an optional member
// `void validate(const JsonFile& f, const std::string& at) const`, called after the read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_number.hpp"

namespace shardtrain::json_fields {

// Whether a key may be missing. kRequired: it must be there (an optional member's may be null).
// kMayBeAbsent: a missing key reads as the member's default (an optional's null too): a field newer
// than the format. kOmittedWhenEmpty: as kMayBeAbsent, and an empty optional (or an empty container
// or string: a record's "record_path") is not written.
enum class Presence { kRequired, kMayBeAbsent, kOmittedWhenEmpty };
inline constexpr Presence kRequired = Presence::kRequired;
inline constexpr Presence kMayBeAbsent = Presence::kMayBeAbsent;
inline constexpr Presence kOmittedWhenEmpty = Presence::kOmittedWhenEmpty;

struct ByType {};  // no codec: the member's type chooses

template <typename T, typename M, typename Codec>
struct Key {
  const char* name;
  M T::*member;
  Codec codec;
  Presence presence;
};
template <typename T, typename M>
struct Inlined {
  M T::*member;
};
template <typename T, typename R>
struct Written {
  const char* name;
  R (T::*get)() const;
};

struct FormatTag {
  const char* name;
  const char* value;
  const char* what;
};
struct Version {
  const char* name;
  std::int64_t number;
};
struct Constant {
  const char* name;
  nlohmann::json value;
};
inline FormatTag format_tag(const char* name, const char* value, const char* what) { return {name, value, what}; }
inline Version version(const char* name, std::int64_t number) { return {name, number}; }
inline Constant constant(const char* name, nlohmann::json value) { return {name, std::move(value)}; }

template <typename... Entries>
struct Group {
  const char* name;
  std::tuple<Entries...> entries;
};
template <typename... Entries>
Group<Entries...> group(const char* name, Entries... entries) { return {name, {entries...}}; }
template <typename Pred, typename... Entries>
struct When {
  Pred pred;
  std::tuple<Entries...> entries;
};
template <typename Pred, typename... Entries>
When<Pred, Entries...> when(Pred pred, Entries... entries) { return {pred, {entries...}}; }
template <typename F>
struct WrittenBy {
  const char* name;
  F get;
};
template <typename F>
WrittenBy<F> written_by(const char* name, F get) { return {name, get}; }

template <typename T, typename M>
constexpr Key<T, M, ByType> key(const char* name, M T::*member, Presence presence = kRequired) {
  return {name, member, {}, presence};
}
template <typename T, typename M, typename Codec>
  requires(!std::is_same_v<Codec, Presence>)
constexpr Key<T, M, Codec> key(const char* name, M T::*member, Codec codec, Presence presence = kRequired) {
  return {name, member, codec, presence};
}
template <typename T, typename M>
constexpr Inlined<T, M> inlined(M T::*member) { return {member}; }
template <typename K>
struct UnlessDefault {
  K key;
};
template <typename T, typename M, typename C>
constexpr UnlessDefault<Key<T, M, C>> unless_default(Key<T, M, C> k) {
  k.presence = kMayBeAbsent;
  return {k};
}
template <typename T, typename R>
constexpr Written<T, R> written(const char* name, R (T::*get)() const) { return {name, get}; }

// An enum by its name table (base/name_table.hpp's {name, value} pairs). An unknown name:
// "field /precision must be bf16 or fp32 (got 'fp16')".
template <typename Enum, std::size_t N>
struct Names {
  const std::pair<const char*, Enum> (*table)[N];
  Enum read(const JsonFile& f, const std::string& pointer) const;
  nlohmann::json write(Enum v) const;
};
template <typename Enum, std::size_t N>
constexpr Names<Enum, N> names(const std::pair<const char*, Enum> (&table)[N]) { return {&table}; }

// A number inside a range, by json_number.hpp's rule: "field /mfu is 2.0, not in [0.0, 1.0]".
struct In {
  NumberRange range;
  double read(const JsonFile& f, const std::string& pointer) const;
};
inline In in(NumberRange range) { return {range}; }
// An integer inside [lo, hi] (integer()'s rule, then the range): "field /ranks is 0, not in [1, 16]".
struct WholeIn {
  std::int64_t lo, hi;
  std::int64_t read(const JsonFile& f, const std::string& pointer) const;
};
inline WholeIn whole_in(std::int64_t lo, std::int64_t hi) { return {lo, hi}; }

// A string written as null when empty and read back as "" from null (a run's checkpoint_id before
// its first checkpoint). The key must be present.
struct EmptyAsNull {
  std::string read(const JsonFile& f, const std::string& pointer) const;
  nlohmann::json write(const std::string& s) const { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }
};
inline constexpr EmptyAsNull empty_as_null{};

// A string held in an object of one key: stop_reason "x" as "stop": {"reason": "x"}.
struct InObject {
  const char* key;
  std::string read(const JsonFile& f, const std::string& pointer) const { return f.string(field(pointer, key)); }
  nlohmann::json write(const std::string& s) const { return {{key, s}}; }
};
inline InObject in_object(const char* key) { return {key}; }

// A number written times `write_factor` and read times `read_factor` (bytes/s as MB/s: 1e-6, 1e6).
struct Scaled {
  double write_factor, read_factor;
  double read(const JsonFile& f, const std::string& pointer) const { return f.number(pointer) * read_factor; }
  nlohmann::json write(double v) const { return v * write_factor; }
};
inline Scaled scaled(double write_factor, double read_factor) { return {write_factor, read_factor}; }

// A list of ranks: an array of counts (>= 0), each a rank.
std::vector<int> ranks(const JsonFile& f, const std::string& pointer);

// A value that must be a JSON object, kept as it is (a run's "config").
nlohmann::json object(const JsonFile& f, const std::string& pointer);

// The name list of an enum table, for messages: "a, b or c".
std::string choices(const char* const* names, std::size_t n);

namespace detail {

template <typename X> struct is_optional : std::false_type {};
template <typename X> struct is_optional<std::optional<X>> : std::true_type {};
template <typename X> struct is_vector : std::false_type {};
template <typename X> struct is_vector<std::vector<X>> : std::true_type {};
template <typename X> struct is_map : std::false_type {};
template <typename X> struct is_map<std::map<std::string, X>> : std::true_type {};
template <typename X> struct is_int_map : std::false_type {};
template <typename X> struct is_int_map<std::map<int, X>> : std::true_type {};
template <typename X> concept HasEmpty = requires(const X& x) { { x.empty() } -> std::same_as<bool>; };
int int_key(const JsonFile& f, const std::string& pointer, const std::string& key);  // a map<int, X>'s key

template <typename X> concept HasFields = requires { X::fields(); };
template <typename X> concept HasFromJson = requires(const JsonFile& f, const std::string& p) {
  { X::from_json(f, p) } -> std::same_as<X>;
};
template <typename X> concept HasToJson = requires(const X& x) { { x.to_json() } -> std::same_as<nlohmann::json>; };
template <typename X> concept HasValidate = requires(const X& x, const JsonFile& f, const std::string& p) { x.validate(f, p); };
template <typename C, typename V> concept Reads = requires(const C& c, const JsonFile& f, const std::string& p) {
  c.read(f, p);
};
template <typename C, typename V> concept Writes = requires(const C& c, const V& v) { c.write(v); };

}  // namespace detail

template <typename T> T read(const JsonFile& f, const std::string& at);
template <typename T> nlohmann::json write(const T& value);

// One value at `pointer`, by its type (see above).
template <typename V>
V read_value(const JsonFile& f, const std::string& pointer) {
  if constexpr (std::is_same_v<V, double>) return f.number(pointer);
  else if constexpr (std::is_same_v<V, bool>) return boolean(f, pointer);
  else if constexpr (std::is_same_v<V, int>) return small_integer(f, pointer);
  else if constexpr (std::is_same_v<V, std::int64_t>) return integer(f, pointer);
  else if constexpr (std::is_same_v<V, std::uint64_t>) return count(f, pointer);
  else if constexpr (std::is_same_v<V, std::string>) return f.string(pointer);
  else if constexpr (std::is_same_v<V, nlohmann::json>) return f.at(pointer);
  else if constexpr (detail::is_optional<V>::value) return null_or(f, pointer, read_value<typename V::value_type>);
  else if constexpr (detail::is_vector<V>::value) {
    V out;
    for (std::size_t i = 0, n = array_size(f, pointer); i < n; ++i)
      out.push_back(read_value<typename V::value_type>(f, field(pointer, std::to_string(i))));
    return out;
  } else if constexpr (detail::is_map<V>::value) {
    require_object(f, pointer);
    V out;
    for (const auto& item : f.at(pointer).items())
      out.emplace(item.key(), read_value<typename V::mapped_type>(f, field(pointer, item.key())));
    return out;
  } else if constexpr (detail::is_int_map<V>::value) {
    require_object(f, pointer);
    V out;
    for (const auto& item : f.at(pointer).items())
      out.emplace(detail::int_key(f, pointer, item.key()), read_value<typename V::mapped_type>(f, field(pointer, item.key())));
    return out;
  } else if constexpr (detail::HasFields<V>) return read<V>(f, pointer);
  else if constexpr (detail::HasFromJson<V>) return V::from_json(f, pointer);
  else static_assert(sizeof(V) == 0, "json_fields: no reader for this member type");
}

template <typename V>
nlohmann::json write_value(const V& v) {
  if constexpr (detail::is_optional<V>::value) return v ? write_value(*v) : nlohmann::json(nullptr);
  else if constexpr (detail::is_vector<V>::value) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : v) out.push_back(write_value(e));
    return out;
  } else if constexpr (detail::is_map<V>::value) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, e] : v) out[k] = write_value(e);
    return out;
  } else if constexpr (detail::is_int_map<V>::value) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, e] : v) out[std::to_string(k)] = write_value(e);
    return out;
  } else if constexpr (detail::HasFields<V>) return write(v);
  else if constexpr (detail::HasToJson<V>) return v.to_json();
  else return nlohmann::json(v);
}

namespace detail {

template <typename V, typename Codec>
V read_with(const JsonFile& f, const std::string& pointer, const Codec& codec) {
  if constexpr (std::is_same_v<Codec, ByType>) return read_value<V>(f, pointer);
  else if constexpr (Reads<Codec, V>) return codec.read(f, pointer);
  else return std::invoke(codec, f, pointer);
}

template <typename V, typename Codec>
nlohmann::json write_with(const V& v, const Codec& codec) {
  if constexpr (Writes<Codec, V>) return codec.write(v);
  else return write_value(v);
}

template <typename T, typename M, typename C>
void read_entry(const JsonFile& f, const std::string& at, T& out, const Key<T, M, C>& e) {
  const std::string pointer = field(at, e.name);
  if (e.presence != kRequired && !f.has(pointer)) return;  // the member's default
  M& m = out.*e.member;
  if constexpr (is_optional<M>::value)
    m = f.at(pointer).is_null() ? std::nullopt : M(read_with<typename M::value_type>(f, pointer, e.codec));
  else
    m = read_with<M>(f, pointer, e.codec);
}

template <typename T, typename M>
void read_entry(const JsonFile& f, const std::string& at, T& out, const Inlined<T, M>& e) {
  if constexpr (is_optional<M>::value) {
    using V = typename M::value_type;
    const char* first = std::get<0>(V::fields()).name;  // the keys come together
    out.*e.member = f.has(field(at, first)) ? M(read_value<V>(f, at)) : std::nullopt;
  } else {
    out.*e.member = read_value<M>(f, at);
  }
}

template <typename T, typename K>
void read_entry(const JsonFile& f, const std::string& at, T& out, const UnlessDefault<K>& e) { read_entry(f, at, out, e.key); }
template <typename T, typename R>
void read_entry(const JsonFile&, const std::string&, T&, const Written<T, R>&) {}
template <typename T>
void read_entry(const JsonFile&, const std::string&, T&, const Constant&) {}
void check_entry(const JsonFile& f, const std::string& at, const FormatTag& e);
void check_entry(const JsonFile& f, const std::string& at, const Version& e);
template <typename T>
void read_entry(const JsonFile& f, const std::string& at, T&, const FormatTag& e) { check_entry(f, at, e); }
template <typename T, typename... Entries>
void read_entry(const JsonFile& f, const std::string& at, T& out, const Group<Entries...>& g);
template <typename T>
void read_entry(const JsonFile& f, const std::string& at, T&, const Version& e) { check_entry(f, at, e); }
template <typename T, typename Pred, typename... Entries>
void read_entry(const JsonFile& f, const std::string& at, T& out, const When<Pred, Entries...>& w);
template <typename T, typename F>
void read_entry(const JsonFile&, const std::string&, T&, const WrittenBy<F>&) {}

template <typename T, typename M, typename C>
void write_entry(nlohmann::json& j, const T& v, const Key<T, M, C>& e) {
  const M& m = v.*e.member;
  if constexpr (is_optional<M>::value) {
    if (!m) {
      if (e.presence != kOmittedWhenEmpty) j[e.name] = nullptr;
      return;
    }
    j[e.name] = write_with(*m, e.codec);
  } else {
    if constexpr (HasEmpty<M>)
      if (e.presence == kOmittedWhenEmpty && m.empty()) return;
    j[e.name] = write_with(m, e.codec);
  }
}

template <typename T, typename M>
void write_entry(nlohmann::json& j, const T& v, const Inlined<T, M>& e) {
  const M& m = v.*e.member;
  if constexpr (is_optional<M>::value) {
    if (m) j.update(write_value(*m));
  } else {
    j.update(write_value(m));
  }
}

template <typename T, typename K>
void write_entry(nlohmann::json& j, const T& v, const UnlessDefault<K>& e) {
  const auto& m = v.*e.key.member;
  if (!(m == std::remove_cvref_t<decltype(m)>{})) write_entry(j, v, e.key);
}
template <typename T, typename R>
void write_entry(nlohmann::json& j, const T& v, const Written<T, R>& e) {
  j[e.name] = write_value((v.*e.get)());
}
template <typename T>
void write_entry(nlohmann::json& j, const T&, const FormatTag& e) { j[e.name] = e.value; }
template <typename T>
void write_entry(nlohmann::json& j, const T&, const Version& e) { j[e.name] = e.number; }
template <typename T>
void write_entry(nlohmann::json& j, const T&, const Constant& e) { j[e.name] = e.value; }
template <typename T, typename... Entries>
void write_entry(nlohmann::json& j, const T& v, const Group<Entries...>& g);
template <typename T, typename Pred, typename... Entries>
void write_entry(nlohmann::json& j, const T& v, const When<Pred, Entries...>& w);
template <typename T, typename F>
void write_entry(nlohmann::json& j, const T& v, const WrittenBy<F>& e) { j[e.name] = write_value(std::invoke(e.get, v)); }

}  // namespace detail

// The entries of `list` (a tuple of them) read from the object at `at` into `out`, in the list's
// order (so the first problem in that order is the one named).
template <typename T, typename List>
void read_fields(const JsonFile& f, const std::string& at, T& out, const List& list) {
  require_object(f, at);
  std::apply([&](const auto&... e) { (detail::read_entry(f, at, out, e), ...); }, list);
}

template <typename T, typename List>
nlohmann::json write_fields(const T& value, const List& list) {
  nlohmann::json j = nlohmann::json::object();
  std::apply([&](const auto&... e) { (detail::write_entry(j, value, e), ...); }, list);
  return j;
}

// The object at `at` (must be an object) by T::fields(), then T::validate if T has one.
template <typename T>
T read(const JsonFile& f, const std::string& at) {
  T out{};
  read_fields(f, at, out, T::fields());
  if constexpr (detail::HasValidate<T>) out.validate(f, at);
  return out;
}

template <typename T>
nlohmann::json write(const T& value) { return write_fields(value, T::fields()); }

namespace detail {
template <typename T, typename... Entries>
void read_entry(const JsonFile& f, const std::string& at, T& out, const Group<Entries...>& g) {
  read_fields(f, field(at, g.name), out, g.entries);
}
template <typename T, typename... Entries>
void write_entry(nlohmann::json& j, const T& v, const Group<Entries...>& g) {
  j[g.name] = write_fields(v, g.entries);
}
template <typename T, typename Pred, typename... Entries>
void read_entry(const JsonFile& f, const std::string& at, T& out, const When<Pred, Entries...>& w) {
  if (f.has(field(at, std::get<0>(w.entries).name))) read_fields(f, at, out, w.entries);
}
template <typename T, typename Pred, typename... Entries>
void write_entry(nlohmann::json& j, const T& v, const When<Pred, Entries...>& w) {
  if (std::invoke(w.pred, v)) j.update(write_fields(v, w.entries));
}
}  // namespace detail

// keyed_by's codec (see above).
template <typename X, typename List>
struct KeyedBy {
  std::string X::*name;
  List list;
  std::vector<X> read(const JsonFile& f, const std::string& pointer) const {
    require_object(f, pointer);
    std::vector<X> out;
    for (const auto& item : f.at(pointer).items()) {
      X& x = out.emplace_back();
      x.*name = item.key();
      read_fields(f, field(pointer, item.key()), x, list);
    }
    return out;
  }
  nlohmann::json write(const std::vector<X>& v) const {
    nlohmann::json out = nlohmann::json::object();
    for (const X& x : v) out[x.*name] = write_fields(x, list);
    return out;
  }
};
template <typename X, typename List>
KeyedBy<X, List> keyed_by(std::string X::*name, List list) { return {name, list}; }

template <typename Enum, std::size_t N>
Enum Names<Enum, N>::read(const JsonFile& f, const std::string& pointer) const {
  const std::string name = f.string(pointer);
  const char* all[N];
  for (std::size_t i = 0; i < N; ++i) {
    if (name == (*table)[i].first) return (*table)[i].second;
    all[i] = (*table)[i].first;
  }
  f.fail("field " + pointer + " must be " + choices(all, N) + " (got '" + name + "')");
}

template <typename Enum, std::size_t N>
nlohmann::json Names<Enum, N>::write(Enum v) const {
  for (const auto& [name, value] : *table)
    if (value == v) return name;
  return "?";
}

// ---- for values in memory, and three codecs (the decision layer's records and policy) ----------

// T read from JSON already in memory (a test's literal, a block another reader holds), its errors
// naming `path` and `what` as a file's would.
template <typename T>
T read_json(const nlohmann::json& j, const std::string& path, const std::string& what, const std::string& at = "") {
  return read<T>(JsonFile::parse(j.dump(), path, what), at);
}

// A value that must not be empty (a policy's version, its rubric items): "field /version is empty".
template <typename V = std::string>
struct NonEmpty {
  V read(const JsonFile& f, const std::string& pointer) const {
    V v = read_value<V>(f, pointer);
    if (v.empty()) f.fail("field " + pointer + " is empty");
    return v;
  }
};
template <typename V = std::string>
inline constexpr NonEmpty<V> non_empty{};

// A number > min and <= max: "field /utility/horizon_days is 0.0, not > 0.0".
struct Above {
  double min, max;
  double read(const JsonFile& f, const std::string& pointer) const {
    const double v = f.number(pointer);
    if (!(v > min && v <= max))
      f.fail("field " + pointer + " is " + nlohmann::json(v).dump() + ", not > " + nlohmann::json(min).dump() +
             (max < NumberRange{}.max ? " and <= " + nlohmann::json(max).dump() : ""));
    return v;
  }
};
inline Above above(double min, double max = NumberRange{}.max) { return {min, max}; }

// A format version this reader knows, lowest to highest: "field /format_version is 3, not 1 to 2
// (written by a newer version?)".
struct Versions {
  int lowest, highest;
  int read(const JsonFile& f, const std::string& pointer) const {
    const int v = small_integer(f, pointer);
    if (v < lowest || v > highest)
      f.fail("field " + pointer + " is " + std::to_string(v) + ", not " + std::to_string(lowest) + " to " +
             std::to_string(highest) + " (written by a newer version?)");
    return v;
  }
};
inline constexpr Versions versions(int lowest, int highest) { return {lowest, highest}; }

}  // namespace shardtrain::json_fields
