// The spec's cross-references, checked once it is read (bench_spec.cpp): every name a ratio,
// check, derived reading, "where" or "when" uses exists, no name is given twice, and every
// placeholder of every command, file and argument list is one the runner will fill. Each failure
// is the JsonFile's one-line UsageError naming the field.
#pragma once
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/bench/bench_spec.hpp"

namespace shardtrain::bench {

void check_names(const JsonFile& f, const BenchSpec& s);
void check_placeholders(const JsonFile& f, const BenchSpec& s);

}  // namespace shardtrain::bench
