// The analysis of hang_diagnosis.hpp; the report's text and JSON are in hang_report.cpp.
#include "shardtrain/diagnose/hang_diagnosis.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>

#include "hang_mismatch.hpp"

namespace shardtrain::hang {
namespace {

using nlohmann::json;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

// "AllReduce (step 3, forward)"; "(entry no longer in the ring)" when the ring lost it.
std::string describe(const DumpEntry* e) {
  if (!e) return "(entry no longer in the ring)";
  return e->op + " (step " + std::to_string(e->step) + ", " + e->phase + ")";
}

bool in_flight_state(const std::string& state) {
  return state == "started" || state == "queued" || state == "timed_out";
}

// One group of the job: its name and its members. Ranks that split with one name but different
// colours made different groups of that name (the node groups of a two-level collective, one per
// node); a rank holds at most one group of a name.
struct GroupKey {
  std::string name;
  std::vector<int> members;  // world ranks
  bool operator==(const GroupKey&) const = default;
};

// The job across ranks: its groups in order of first appearance.
class Job {
 public:
  explicit Job(const DumpSet& set) : set_(set) {
    for (const auto& d : set.dumps)
      for (const auto& g : d.groups)
        if (GroupKey k{g.name, g.world_ranks}; std::find(groups_.begin(), groups_.end(), k) == groups_.end())
          groups_.push_back(std::move(k));
  }
  const DumpSet& set() const { return set_; }
  const std::vector<GroupKey>& groups() const { return groups_; }
  // Rank `rank`'s group named `name` (a group of its own dump).
  GroupKey key_of(int rank, const std::string& name) const {
    const DumpGroup* g = set_.dump_of(rank) ? set_.dump_of(rank)->group(name) : nullptr;
    return {name, g ? g->world_ranks : std::vector<int>{}};
  }
  // nullptr when the rank left no dump or never created the group (it then joined nothing of it).
  const DumpGroup* group(int rank, const GroupKey& key) const {
    const RankDump* d = set_.dump_of(rank);
    const DumpGroup* g = d ? d->group(key.name) : nullptr;
    return g && g->world_ranks == key.members ? g : nullptr;
  }

 private:
  const DumpSet& set_;
  std::vector<GroupKey> groups_;
};

// Whether rank d's entry `e` is a later stage of a two-level collective, never issued (queued, or
// timed out while queued) behind an earlier stage of it (its input) that d has not completed: d
// then waits in that earlier stage, and is not behind its peers in this one.
bool behind_own_stage(const RankDump& d, const DumpEntry& e) {
  if (!e.part_of || e.t_start || !in_flight_state(e.state)) return false;
  for (const auto& g : d.groups)
    for (const auto& earlier : g.entries)
      if (earlier.id < e.id && earlier.part_of == e.part_of && earlier.state != "completed") return true;
  return false;
}

// Did `g` (this rank's record of the group) join `seq`? Issued to the transport and not skipped.
bool joined(const DumpGroup* g, std::uint64_t seq) {
  if (g->last_started < seq) return false;
  const DumpEntry* e = g->find(seq);
  return !(e && e->state == "skipped");
}

// The lowest seq this rank has not completed: after its last completed one, or a skipped one
// before it (a skipped operation is never completed, whatever the counters say later).
std::uint64_t first_incomplete(const DumpGroup* g) {
  std::uint64_t seq = g->last_completed + 1;
  for (const auto& e : g->entries)
    if (e.state == "skipped" && e.seq < seq) seq = e.seq;
  return seq;
}

// When a rank's wait on `e` ended, as far as its dump tells: a timed-out wait at its timeout
// (t_end), not at a later dump of the rank (its exit, a signal); otherwise the dump.
double waited_until(const DumpEntry& e, double dumped_at) {
  return e.state == "timed_out" && e.t_end ? *e.t_end : dumped_at;
}

// A group's blocked collective, with when its joiners began waiting.
struct Block {
  BlockedCollective info;
  std::optional<double> began;  // earliest t_start/t_enqueue among the joiners
  double longest_wait = 0;      // longest wait (waited_until - began) over the joiners (0: unknown)
  GroupKey key;
  // No dumped member joined it and every one of them is queued behind an earlier stage of its own:
  // a consequence of the block there, not a collective anyone waited in.
  bool behind_own_stages = false;
  bool peer_missing() const { return !info.not_joined.empty() || !info.no_dump.empty(); }
};

std::optional<Block> blocked_in_group(const Job& job, const GroupKey& key) {
  const std::string& name = key.name;
  const std::vector<int>& members = key.members;
  std::uint64_t seq = std::numeric_limits<std::uint64_t>::max(), max_enqueued = 0;
  // A dumped member without the group is left out: its dump lists live groups only, and the group
  // may already be retired there (a checkpoint writer's group after its last commit).
  for (int r : members) {
    const DumpGroup* g = job.group(r, key);
    if (!g) continue;
    seq = std::min(seq, first_incomplete(g));
    max_enqueued = std::max(max_enqueued, g->last_enqueued);
  }
  if (seq == std::numeric_limits<std::uint64_t>::max() || max_enqueued < seq) return std::nullopt;
  Block b;
  b.key = key;
  b.info.group = name;
  b.info.seq = seq;
  std::size_t queued_behind = 0;
  const DumpEntry* exemplar = nullptr;  // the op as a joiner recorded it, else as anyone did
  for (int r : members) {
    const RankDump* d = job.set().dump_of(r);
    if (!d) {
      b.info.no_dump.push_back(r);
      continue;
    }
    const DumpGroup* g = job.group(r, key);
    if (!g) continue;
    const DumpEntry* e = g->find(seq);
    if (!joined(g, seq)) {
      b.info.not_joined.push_back(r);
      queued_behind += e && behind_own_stage(*d, *e);
      if (!exemplar) exemplar = e;
      continue;
    }
    b.info.joined.push_back(r);
    if (e && (!exemplar || exemplar->state == "skipped")) exemplar = e;
    if (e && e->t_begin()) {
      b.began = b.began ? std::min(*b.began, *e->t_begin()) : *e->t_begin();
      b.longest_wait = std::max(b.longest_wait, waited_until(*e, d->dumped_at) - *e->t_begin());
    }
  }
  b.behind_own_stages = b.info.joined.empty() && b.info.no_dump.empty() && queued_behind == b.info.not_joined.size();
  if (exemplar) {
    b.info.op = exemplar->op;
    b.info.numel = exemplar->numel;
    b.info.dtype = exemplar->dtype;
    b.info.step = exemplar->step;
    b.info.phase = exemplar->phase;
    b.info.part_of = exemplar->part_of;
  }
  return b;
}

std::string describe(const BlockedCollective& b) {
  const std::string what = b.group + " seq " + std::to_string(b.seq);
  if (b.op.empty()) return what + " (no ring holds its entry any more)";
  const std::string stage_of = b.part_of ? ", a stage of " + b.part_of->group + "'s two-level " + b.part_of->op + " no. " +
                                               std::to_string(b.part_of->collective)
                                         : "";
  return what + " " + b.op + " (step " + std::to_string(b.step) + ", " + b.phase + stage_of + ")";
}

// The operation a rank is waiting in (started, queued or timed out, not completed), the earliest
// it began, in any group but `except`.
struct Wait {
  std::string group;
  std::uint64_t seq = 0;
  const DumpEntry* entry = nullptr;
  double for_s = 0;
};

std::optional<Wait> waiting_in(const RankDump& d, const std::string& except = "") {
  std::optional<Wait> best;
  std::optional<double> best_begin;
  for (const auto& g : d.groups) {
    if (g.name == except) continue;
    const std::uint64_t seq = g.last_completed + 1;
    if (g.last_enqueued < seq) continue;
    const DumpEntry* e = g.find(seq);
    if (e && !in_flight_state(e->state)) continue;  // skipped or aborted: not waiting there
    if (e && behind_own_stage(d, *e)) continue;      // waiting in the earlier stage, found on its own
    const std::optional<double> begin = e ? e->t_begin() : std::nullopt;
    if (best && !(begin && (!best_begin || *begin < *best_begin))) continue;
    best = Wait{g.name, seq, e, begin ? (e ? waited_until(*e, d.dumped_at) : d.dumped_at) - *begin : 0};
    best_begin = begin;
  }
  return best;
}

std::string describe(const Wait& w) {
  const bool timed_out = w.entry && w.entry->state == "timed_out";
  return std::string(timed_out ? "timed out in " : "waiting in ") + w.group + " seq " + std::to_string(w.seq) + " " +
         describe(w.entry) + (timed_out ? " after " : " for ") + seconds(w.for_s);
}

std::string outside_collective(const RankDump& d) {
  if (!d.now.known) return "outside any collective (the dump has no \"now\")";
  return "in " + d.now.phase + " at step " + std::to_string(d.now.step) + " for " + seconds(d.dumped_at - d.now.since) +
         ", outside any collective";
}

// ---- the diagnosis, step by step --------------------------------------------------------------

class Diagnoser {
 public:
  Diagnoser(const DumpSet& set, const DiagnosisOptions& options) : job_(set), options_(options) {}

  Diagnosis run() {
    list_dumps();
    scan_reasons();
    describe_ranks();
    out_.mismatches = find_mismatches(job_.set());
    const std::optional<Block> blocked = first_blocked();
    if (blocked) out_.blocked = blocked->info;
    if (!out_.mismatches.empty()) judge_mismatch(out_.mismatches.front());
    else if (blocked) judge_hang(*blocked);
    else if (first_exit_) judge_error_exit(*first_exit_);
    else if (!out_.missing_ranks.empty()) judge_missing();
    else if (triggered_) conclude(Verdict::kHang, "a rank reported a collective timeout or transport error, but the "
                                                  "dumps show no collective left incomplete");
    else no_hang();
    return std::move(out_);
  }

 private:
  void list_dumps() {
    const DumpSet& set = job_.set();
    out_.job_id = set.job_id;
    out_.world_size = set.world_size;
    for (const auto& d : set.dumps) out_.dumps.push_back({d.rank, d.file, d.reason, d.dumped_at});
    out_.missing_ranks = set.missing_ranks();
  }

  // Which kind of dumps these are: failures (timeout/error), exits, or snapshots of a live job.
  void scan_reasons() {
    for (const auto& d : job_.set().dumps) {
      if (d.reason == "timeout" || d.reason == "error") {
        triggered_ = true;
        if (!d.timed_out_group.empty()) trigger_groups_.push_back(job_.key_of(d.rank, d.timed_out_group));
        if (d.trigger.is_object() && d.trigger.contains("timeout_ms") && d.trigger["timeout_ms"].is_number())
          timeout_s_ = d.trigger["timeout_ms"].get<double>() / 1000.0;
      } else if (d.reason == "exit") {
        if (!first_exit_ || d.dumped_at < first_exit_->dumped_at) first_exit_ = &d;
      }
    }
  }

  void describe_ranks() {
    for (int r = 0; r < job_.set().world_size; ++r) {
      RankStatus s;
      s.rank = r;
      const RankDump* d = job_.set().dump_of(r);
      if (!d) {
        s.doing = "no dump (killed or crashed before it could write one)";
      } else {
        s.dump = true;
        s.reason = d->reason;
        s.now = d->now;
        if (d->now.known) s.now_for_s = d->dumped_at - d->now.since;
        s.doing = doing(*d);
      }
      out_.ranks.push_back(std::move(s));
    }
  }

  static std::string doing(const RankDump& d) {
    std::string text = d.reason == "exit" ? "exited with error: " + d.error_message() + "; " : "";
    if (d.reason == "error" && d.trigger.is_object() && d.trigger.contains("error"))
      text = "its transport failed " + d.trigger.value("group", std::string("?")) + " seq " +
             std::to_string(d.trigger.value("seq", 0)) + " " + d.trigger.value("op", std::string("?")) + ": " +
             d.trigger["error"].get<std::string>();
    for (const auto& g : d.groups)
      for (const auto& e : g.entries)
        if (e.state == "skipped" && e.seq > g.last_completed)
          text += "skipped " + g.name + " seq " + std::to_string(e.seq) + " " + describe(&e) + "; ";
    if (d.reason == "error" && !text.empty()) return text;  // its wait ended there, with the error
    const std::optional<Wait> w = waiting_in(d);
    return text + (w ? describe(*w) : outside_collective(d));
  }

  // Whether a group's blocked collective is a hang for these dumps (contract 6 of docs/ARCHITECTURE.md).
  bool hangs(const Block& b) const {
    const bool stalled = b.longest_wait > timeout_s_;
    // A rank without a dump while others wrote theirs ended abnormally (dumps come from failures
    // and signals): the job did not end well, as with a trigger.
    if (triggered_ || first_exit_ || !out_.missing_ranks.empty())
      return b.peer_missing() || stalled || triggered_in(b.key);
    return (b.peer_missing() && b.longest_wait > options_.min_wait_s) || stalled;
  }

  bool triggered_in(const GroupKey& key) const {
    return std::find(trigger_groups_.begin(), trigger_groups_.end(), key) != trigger_groups_.end();
  }

  // The blocked collective: the one whose joiners began waiting first, or the one a trigger names.
  // The later stages of a two-level collective that wait behind a blocked earlier stage are not
  // candidates while another block is.
  std::optional<Block> first_blocked() const {
    std::vector<Block> blocks;
    for (const auto& key : job_.groups())
      if (std::optional<Block> b = blocked_in_group(job_, key); b && hangs(*b)) blocks.push_back(std::move(*b));
    if (std::any_of(blocks.begin(), blocks.end(), [](const Block& b) { return !b.behind_own_stages; }))
      blocks.erase(std::remove_if(blocks.begin(), blocks.end(), [](const Block& b) { return b.behind_own_stages; }),
                   blocks.end());
    if (blocks.empty()) return std::nullopt;
    auto earlier = [](const Block& a, const Block& b) { return a.began && (!b.began || *a.began < *b.began); };
    const Block* first = &*std::min_element(blocks.begin(), blocks.end(), earlier);
    for (const auto& b : blocks) {
      if (!triggered_in(b.key)) continue;
      const bool close = !b.began || !first->began || *b.began - *first->began <= kCloseSeconds;
      if (close) first = &b;
      break;
    }
    return *first;
  }

  // ---- verdicts ----

  // No collective left incomplete, but ranks left no dump: they died (killed, crashed) before the
  // others got stuck on them, so they are the evidence.
  void judge_missing() {
    const std::vector<int>& missing = out_.missing_ranks;
    if (missing.size() == 1)
      return blame(Verdict::kHang, culprit(missing[0], Cause::kNoDump,
                   "rank " + std::to_string(missing[0]) + " left no dump (killed or crashed before it could write "
                   "one) while every other rank wrote one; no collective was left waiting on it yet"));
    ambiguous(missing, "ranks " + rank_list(missing) + " left no dump (killed or crashed) and no collective shows "
                       "which of them failed first");
  }

  // A snapshot of a live job may show collectives in flight: name them, they are not a hang.
  void no_hang() {
    for (const auto& d : job_.set().dumps)
      if (const std::optional<Wait> w = waiting_in(d))
        out_.explanation.push_back("In flight: rank " + std::to_string(d.rank) + " " + describe(*w) + ".");
    conclude(Verdict::kNoHang, "No hang found: every collective was completed, or joined by every member and in "
                               "flight for less than the collective timeout.");
  }

  void conclude(Verdict v, const std::string& sentence) {
    out_.verdict = v;
    out_.explanation.push_back(sentence);
  }

  // A culprit with its host (from its flight record, when it left one).
  Culprit culprit(int rank, Cause cause, std::string evidence) const {
    Culprit c;
    c.rank = rank;
    c.cause = cause;
    c.evidence = std::move(evidence);
    if (const RankDump* d = job_.set().dump_of(rank)) {
      c.host = d->hostname;
      if (cause == Cause::kErrorExit) c.error = d->error_message();
    }
    return c;
  }

  void blame(Verdict v, Culprit c) {
    out_.candidates = {c.rank};
    conclude(v, c.evidence + ".");
    out_.culprit = std::move(c);
  }

  void ambiguous(std::vector<int> candidates, const std::string& reason) {
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    out_.candidates = candidates;
    conclude(Verdict::kAmbiguous, "Ambiguous: " + reason + "; it could be rank(s) " + rank_list(candidates) + ".");
  }

  void judge_mismatch(const Mismatch& m) {
    out_.explanation.push_back(std::to_string(out_.mismatches.size()) +
                               " mismatch(es): ranks recorded different collectives at the same group and seq; the first "
                               "is " + m.group + " seq " + std::to_string(m.seq) + " (" + m.field + ").");
    std::map<json, std::vector<int>> ranks_by_value;
    for (const auto& [rank, v] : m.values) ranks_by_value[v].push_back(rank);
    for (const auto& [value, ranks] : ranks_by_value) {
      if (2 * ranks.size() <= m.values.size()) continue;  // not a strict majority
      std::vector<int> minority;
      for (const auto& [rank, v] : m.values)
        if (v != value) minority.push_back(rank);
      if (minority.size() > 1) return ambiguous(minority, "several ranks disagree with the majority at " + m.group + " seq " + std::to_string(m.seq));
      const int r = minority.front();
      return blame(Verdict::kMismatch,
                   culprit(r, Cause::kMismatch,
                           "rank " + std::to_string(r) + " recorded " + m.field + " " + m.values.at(r).dump() + " at " +
                               m.group + " seq " + std::to_string(m.seq) + " where ranks " + rank_list(ranks) +
                               " recorded " + value.dump()));
    }
    const std::optional<json> history = value_from_history(job_.set(), m);
    std::vector<int> all, disagree;
    for (const auto& [rank, v] : m.values) {
      all.push_back(rank);
      if (history && v != *history) disagree.push_back(rank);
    }
    if (!history || disagree.size() != 1)
      return ambiguous(all, "no majority for " + m.field + " at " + m.group + " seq " + std::to_string(m.seq) +
                                (history ? " and earlier steps do not single out one rank"
                                         : " and no earlier step recorded the same collective"));
    const int r = disagree.front();
    blame(Verdict::kMismatch,
          culprit(r, Cause::kMismatch,
                  "rank " + std::to_string(r) + " recorded " + m.field + " " + m.values.at(r).dump() + " at " + m.group +
                      " seq " + std::to_string(m.seq) + ", unlike the same collective in earlier steps (" +
                      history->dump() + ")"));
  }

  // The first rank to exit on an error is named; when others exited with the same message the
  // error was the job's (a NaN every rank computed), and the evidence says so.
  void judge_error_exit(const RankDump& d) {
    std::vector<int> same;
    for (const auto& other : job_.set().dumps)
      if (other.reason == "exit" && other.error_message() == d.error_message()) same.push_back(other.rank);
    std::string evidence = "rank " + std::to_string(d.rank) + " exited with error: " + d.error_message();
    if (same.size() > 1)
      evidence += " (ranks " + rank_list(same) + " exited with this error; rank " + std::to_string(d.rank) +
                  " first: an error of the whole job, not of one rank)";
    Culprit c = culprit(d.rank, Cause::kErrorExit, evidence);
    c.same_error_ranks = same;
    c.job_wide = same.size() > 1;
    blame(Verdict::kErrorExit, std::move(c));
  }

  // The chain of 4.: who each non-joiner was waiting for, until ranks that were not waiting.
  struct Chain {
    std::vector<Culprit> candidates;
    std::vector<BlockedCollective> found_in;  // per candidate: the blocked collective it did not join
    std::vector<int> cycle;  // non-empty: the ranks that wait on each other
    void add(Culprit c, const BlockedCollective& where) {
      candidates.push_back(std::move(c));
      found_in.push_back(where);
    }
  };

  // `on_path`: the ranks of the blocks followed so far down this chain (joiners and non-joiners);
  // meeting one again as a non-joiner closes a cycle. `done_`: ranks already classified through
  // another branch (two non-joiners waiting on the same third rank is no cycle).
  void follow(const Block& b, std::set<int> on_path, Chain& chain, std::vector<int>& path) {
    on_path.insert(b.info.joined.begin(), b.info.joined.end());
    const std::string what = describe(b.info);
    if (!b.peer_missing())
      for (int r : b.info.joined)
        chain.add(culprit(r, Cause::kStalledTransport,
                          "every member joined " + what + " but it did not complete: the transport stalled"),
                  b.info);
    for (int r : b.info.not_joined) {
      if (on_path.count(r)) {
        chain.cycle = path;
        chain.cycle.push_back(r);
        continue;
      }
      if (!done_.insert(r).second) continue;
      path.push_back(r);
      std::set<int> next_path = on_path;
      next_path.insert(r);
      classify(r, b, next_path, chain, path);
      path.pop_back();
    }
    for (int r : b.info.no_dump)
      chain.add(culprit(r, Cause::kNoDump,
                        "rank " + std::to_string(r) + " left no dump (killed or crashed before it could write one) "
                        "and never joined " + what + ", which rank(s) " + rank_list(b.info.joined) + " waited in"),
                b.info);
  }

  void classify(int r, const Block& b, const std::set<int>& on_path, Chain& chain, std::vector<int>& path) {
    const RankDump& d = *job_.set().dump_of(r);
    const DumpGroup* g = d.group(b.info.group);
    const DumpEntry* e = g ? g->find(b.info.seq) : nullptr;
    const std::string who = "rank " + std::to_string(r), what = describe(b.info);
    const std::string waited = "while rank(s) " + rank_list(b.info.joined) + " waited in it" +
                               (b.longest_wait > 0 ? " for up to " + seconds(b.longest_wait) : "");
    if (e && e->state == "skipped")
      return chain.add(culprit(r, Cause::kSkipped, who + " skipped " + what + " " + waited), b.info);
    // A skip in another group of the rank (a TP group, say) blocks its queue there: that is why it
    // never reached this one.
    for (const auto& other : d.groups)
      for (const auto& s : other.entries)
        if (other.name != b.info.group && s.state == "skipped" && s.seq > other.last_completed)
          return chain.add(culprit(r, Cause::kSkipped,
                                   who + " skipped " + other.name + " seq " + std::to_string(s.seq) + " " +
                                       describe(&s) + ", so it never joined " + what + " " + waited),
                           b.info);
    if (d.reason == "exit")
      return chain.add(
          culprit(r, Cause::kErrorExit, who + " exited with error (" + d.error_message() + ") before joining " + what), b.info);
    if (const std::optional<Wait> w = waiting_in(d, b.info.group)) {
      out_.explanation.push_back(who + " did not join " + what + ": it was " + describe(*w) + ".");
      if (const std::optional<Block> next = blocked_in_group(job_, job_.key_of(r, w->group)))
        return follow(*next, on_path, chain, path);
    }
    if (g && g->last_enqueued >= b.info.seq)
      return chain.add(
          culprit(r, Cause::kStalledTransport, who + " submitted " + what + " but never issued it to the transport"), b.info);
    chain.add(culprit(r, Cause::kOutsideCollective,
                      who + " never reached " + what + ": it was " + outside_collective(d) + "; " +
                          last_completed(r, b.info.group) + "; " + waited.substr(6)),
              b.info);
  }

  std::string last_completed(int r, const std::string& group) const {
    const DumpGroup* g = job_.set().dump_of(r) ? job_.set().dump_of(r)->group(group) : nullptr;
    if (!g || g->last_completed == 0) return "it completed nothing in " + group;
    return "its last completed " + group + " seq " + std::to_string(g->last_completed) + " was " +
           describe(g->find(g->last_completed));
  }

  void judge_hang(const Block& b) {
    const BlockedCollective& info = b.info;
    out_.explanation.push_back("The first collective not completed by every member is " + describe(info) +
                               ": joined by rank(s) " + rank_list(info.joined) +
                               (info.not_joined.empty() ? "" : ", not joined by " + rank_list(info.not_joined)) +
                               (info.no_dump.empty() ? "" : ", no dump from " + rank_list(info.no_dump)) + ".");
    for (int r : info.not_joined) {
      auto& status = out_.ranks[std::size_t(r)];
      status.doing = last_completed(r, info.group) + "; " + status.doing;
    }
    Chain chain;
    std::vector<int> path;
    follow(b, {}, chain, path);
    if (!chain.cycle.empty())
      return ambiguous(chain.cycle, "ranks wait on each other in different groups (a cycle: the collectives were "
                                    "issued in a different order on different ranks)");
    std::vector<int> ranks;
    for (const auto& c : chain.candidates) ranks.push_back(c.rank);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    if (ranks.size() != 1) {
      for (const auto& c : chain.candidates) out_.explanation.push_back(c.evidence + ".");
      const bool stalled = std::all_of(chain.candidates.begin(), chain.candidates.end(),
                                       [](const Culprit& c) { return c.cause == Cause::kStalledTransport; });
      return ambiguous(ranks, stalled ? "every member joined the collective but it did not complete (the transport "
                                        "stalled); no rank is behind"
                                      : "several ranks did not join, with no way to tell which came first");
    }
    // The collective the culprit never joined, where the first one is not its own (a stage of a
    // two-level collective on another node, whose ranks wait on it through the cross-node stage).
    const BlockedCollective& culprits = chain.found_in.front();
    const auto member = [&](const BlockedCollective& x, int r) {
      return std::count(x.not_joined.begin(), x.not_joined.end(), r) + std::count(x.no_dump.begin(), x.no_dump.end(), r) > 0;
    };
    if (!member(info, chain.candidates.front().rank) && member(culprits, chain.candidates.front().rank)) {
      out_.explanation.push_back("Rank " + std::to_string(chain.candidates.front().rank) + " is not a member of " +
                                 describe(info) + "; the collective of its own that it never joined is " +
                                 describe(culprits) + ".");
      out_.blocked = culprits;
    }
    Culprit c = chain.candidates.front();
    blame(c.cause == Cause::kErrorExit ? Verdict::kErrorExit : Verdict::kHang, std::move(c));
  }

  Job job_;
  DiagnosisOptions options_;
  Diagnosis out_;
  std::set<int> done_;                    // non-joiners classified so far
  bool triggered_ = false;                // a timeout or error dump
  std::vector<GroupKey> trigger_groups_;  // their timed_out_group
  const RankDump* first_exit_ = nullptr;  // the earliest exit dump
  double timeout_s_ = options_.collective_timeout_s;
};

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kNoHang: return "no-hang";
    case Verdict::kHang: return "hang";
    case Verdict::kMismatch: return "mismatch";
    case Verdict::kErrorExit: return "error-exit";
    case Verdict::kAmbiguous: return "ambiguous";
  }
  return "?";
}

Diagnosis diagnose(const DumpSet& dumps, const DiagnosisOptions& options) { return Diagnoser(dumps, options).run(); }

}  // namespace shardtrain::hang
