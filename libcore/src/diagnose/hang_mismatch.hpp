// Private to hang_diagnosis.cpp: the ranks' records of one collective compared field by field, and
// what the same collective looked like in earlier steps (to settle a mismatch between two ranks).
#pragma once
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/diagnose/flight_dump.hpp"
#include "shardtrain/diagnose/hang_diagnosis.hpp"

namespace shardtrain::hang {

// Every (group, seq, field) where two ranks' rings hold the entry with a different op, numel, dtype
// or root. Entries are aligned by seq (never by position: rings that wrapped start at different
// seqs); groups in order of first appearance, then seq, then field. Groups are matched by name
// alone here, on purpose: the groups one split makes (a two-level collective's node groups, one per
// node, all named "dp.node") run the same operations in the same order, so entry seq of one is the
// same stage of the same call as entry seq of another, and the ranks of the other nodes outvote a
// node of two.
std::vector<Mismatch> find_mismatches(const DumpSet& set);

// The value of m.field that the same collective had in earlier steps: the k-th entry of the group
// in its step, with the same phase (and op, unless op is the field), where k is the position of the
// mismatched entry (as the lowest rank in m recorded it) within its own step; read from every
// rank's ring. nullopt when no earlier step has it, or the earlier steps disagree among themselves.
std::optional<nlohmann::json> value_from_history(const DumpSet& set, const Mismatch& m);

}  // namespace shardtrain::hang
