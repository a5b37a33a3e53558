#include "shardtrain/stepmodel/sweep.hpp"

#include "shardtrain/base/json_fields.hpp"

namespace shardtrain {

using json_fields::field;

nlohmann::json SweepRow::to_json() const {
  return {{"op", op_name(op)},
          {"impl", impl},
          {"ranks", ranks},
          {"bytes", bytes},
          {"iterations", iterations},
          {"time_s", time_s},
          {"algbw_GBps", algbw_GBps},
          {"busbw_GBps", busbw_GBps},
          {"wrong", wrong}};
}

SweepRow SweepRow::from_json(const JsonFile& f, const std::string& at) {
  SweepRow r;
  const std::string op = f.string(field(at, "op"));
  const auto named = op_named(op);
  if (!named) f.fail("field " + field(at, "op") + " '" + op + "' is not a collective (AllReduce, ReduceScatter, ...)");
  r.op = *named;
  r.impl = f.string(field(at, "impl"));
  r.ranks = json_fields::small_integer(f, field(at, "ranks"));
  r.bytes = json_fields::count(f, field(at, "bytes"));
  r.iterations = json_fields::small_integer(f, field(at, "iterations"));
  r.time_s = f.number(field(at, "time_s"));
  r.algbw_GBps = f.number(field(at, "algbw_GBps"));
  r.busbw_GBps = f.number(field(at, "busbw_GBps"));
  r.wrong = json_fields::count(f, field(at, "wrong"));
  return r;
}

nlohmann::json CollectiveSweep::to_json() const {
  return {{"format", "shardtrain-collectives"},
          {"format_version", 1},
          {"ranks", ranks},
          {"rows", json_fields::array_of(rows)}};
}

CollectiveSweep CollectiveSweep::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_format(f, at, "shardtrain-collectives", "collectives sweep");
  const std::int64_t version = json_fields::integer(f, field(at, "format_version"));
  if (version != 1) f.fail("field " + field(at, "format_version") + " is " + std::to_string(version) + ", not 1");
  CollectiveSweep s;
  s.ranks = json_fields::small_integer(f, field(at, "ranks"));
  s.rows = json_fields::objects<SweepRow>(f, field(at, "rows"));
  return s;
}

CollectiveSweep read_collective_sweep(const std::string& path, const std::string& what) {
  return CollectiveSweep::from_json(JsonFile::read(path, what), "");
}

}  // namespace shardtrain
