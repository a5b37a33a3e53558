// The alpha-beta model of one data-parallel training step at W ranks: the price of a collective
// and of a step. Pure computation, no MPI; the trainers (--allreduce auto --step-model), scale-bench
// predict and the scaling layer's fit, plan and report all price through it. Units: seconds,
// bytes, bytes per second; throughput in tokens per second.
//
//   T(W)    = c(W) + exposed(W) + c(W) x s x log2 W
//   c(W)    = compute_s           weak scaling (every rank keeps its batch)
//           = compute_s / W       strong scaling (the global batch is divided among the ranks)
//   comm(W) = sum over the collectives of one step (op, bytes of one call, calls per step) of
//             calls x (f_op(W) x bytes / busbw + k_op(W) x alpha), the ring cost as nccl-tests counts it:
//               all-reduce                  f = 2(W-1)/W   k = 2(W-1)
//               reduce-scatter, all-gather  f = (W-1)/W    k = W-1
//               broadcast                   f = 1          k = W-1     (all zero at W = 1)
//             `bytes` is the nccl-tests size of one call (comm/types.hpp), busbw the bus bandwidth
//             (bytes/s), alpha the latency of one ring step (s).
//   exposed(W) = max((1 - o) x comm(W),  sum over the passes p (forward, backward) of
//                    pinned_p + max(0, streamed_p - share_p x (1 - h) x c(W)))
//             the communication the step cannot hide. A collective hides behind the compute of its
//             pass (StepCollective::phase): the gradient all-reduces and reduce-scatters behind the
//             backward pass, ZeRO's parameter gathers for the forward pass behind it; one link
//             carries them in turn. A pinned call cannot overlap its pass at all: the gather of the
//             first unit the forward pass needs, the reduction of the unit backward completes last
//             (GPT-2's embeddings, whose tied wte gets its last gradient at the very end). The
//             streamed ones overlap the pass except its LM head (h: the head's share of each pass,
//             where in backward nothing is ready yet and in forward every gather must already be
//             in). The first term is what a step whose communication is short still shows (the
//             engine's own cost: o as measured); the second what no overlap can hide when a
//             pass's communication outlasts its compute (a slow link).
//   o       overlap: the share of communication hidden behind the compute when the compute is the
//           longer, in [0, 1]
//   f, b    the forward and the backward pass's shares of c(W) (forward_share, backward_share;
//           by FLOPs 1/3 and 2/3 unless measured)
//   s       straggler coefficient: a synchronous step waits for the slowest of W ranks, taken to be
//           c(W) x s x log2 W slower than the typical one
//   throughput(W) = tokens(W) / T(W), tokens(W) = W x tokens_per_step (weak) or tokens_per_step (strong)
//   speedup S(W) = throughput(W) / throughput(1);  efficiency E(W) = S(W) / W.
//
// The same model on two levels (nodes): two_level.hpp. Fitting it to measurements, planning
// layouts with it and its tables sit above train, in the scaling layer.
#pragma once
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_record.hpp"
#include "shardtrain/comm/types.hpp"

namespace shardtrain::scaling {

enum class Scaling { kWeak, kStrong };
const char* scaling_name(Scaling s);  // "weak", "strong"
inline constexpr std::pair<const char*, Scaling> kScalingNames[] = {{"weak", Scaling::kWeak}, {"strong", Scaling::kStrong}};

// The pass a step's collective can hide behind: the backward pass (gradient all-reduces and
// reduce-scatters, ZeRO-3's re-gathers for backward) or the forward pass (ZeRO's parameter gathers
// that the forward pass waits for).
enum class CommPhase { kBackward, kForward };
const char* comm_phase_name(CommPhase p);  // "backward", "forward"
inline constexpr std::pair<const char*, CommPhase> kCommPhaseNames[] = {{"backward", CommPhase::kBackward},
                                                                        {"forward", CommPhase::kForward}};

// A collective operation by its op_name: any operation the communicator knows ("field /op is not
// a collective operation (got 'x')"); is_modelled_op further limits per_op's keys.
struct OpNameCodec {
  CollectiveOp read(const JsonFile& f, const std::string& pointer) const;
  nlohmann::json write(CollectiveOp op) const { return op_name(op); }
};

// One kind of collective issued every step: `calls` calls (an average may be fractional) of
// `bytes` each (nccl-tests size), hidden behind `phase`, or not at all when `pinned` (above).
struct StepCollective {
  CollectiveOp op = CollectiveOp::kAllReduce;
  double bytes = 0;
  double calls = 1;
  CommPhase phase = CommPhase::kBackward;
  bool pinned = false;
  static auto fields() {  // "phase" and "pinned" optional when read: backward, false
    using namespace json_fields;
    using C = StepCollective;
    return std::tuple{key("op", &C::op, OpNameCodec{}), key("bytes", &C::bytes), key("calls", &C::calls),
                      key("phase", &C::phase, names(kCommPhaseNames), kMayBeAbsent), key("pinned", &C::pinned, kMayBeAbsent)};
  }
};
// [{"op", "bytes", "calls", "phase", "pinned"}, ...]: the model file's "collectives", and the fit's
// and plan's copies.
nlohmann::json collectives_json(const std::vector<StepCollective>& collectives);

// The operations the model prices: all-reduce (both kinds), reduce-scatter, all-gather, broadcast
// (not Barrier or Split, which carry no payload).
bool is_modelled_op(CollectiveOp op);

// One link of the two-level model (issue 35): bus bandwidth (bytes/s) and latency of one ring step
// (s). Unknown (busbw 0) unless fitted from a sweep's "intra-node"/"inter-node" rows or given.
struct Link {
  double busbw_Bps = 0, alpha_s = 0;
  bool known() const { return busbw_Bps > 0; }
  bool operator==(const Link&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("busbw_Bps", &Link::busbw_Bps), key("alpha_s", &Link::alpha_s)};
  }
};

// StepModel's "per_op": {"<op_name>": {"busbw_Bps", "alpha_s"}, ...}, modelled operations only.
struct PerOpLinksCodec {
  std::map<CollectiveOp, Link> read(const JsonFile& f, const std::string& pointer) const;
  nlohmann::json write(const std::map<CollectiveOp, Link>& links) const;
};

struct StepModel {
  double compute_s = 0;        // compute of one step on one rank at W = 1 (s)
  Scaling scaling = Scaling::kWeak;
  double tokens_per_step = 1;  // tokens of one step at W = 1
  std::vector<StepCollective> collectives;
  double busbw_Bps = 0;        // bus bandwidth (bytes/s)
  double alpha_s = 0;          // latency of one ring step (s)
  // The one-level link per operation, where a sweep measured them apart (fit: each operation's
  // own rows): a link need not run every collective at one bus bandwidth (a shaped TCP link here
  // ran the all-reduce's simultaneous exchanges at 0.6 of its reduce-scatter's and all-gather's
  // rate). An operation without an entry gets busbw_Bps and alpha_s. JSON "per_op" (optional).
  std::map<CollectiveOp, Link> op_links;
  // The one-level link that prices `op` (the canonical all-reduce as the all-reduce).
  Link link_for(CollectiveOp op) const;
  double overlap = 0;          // o in [0, 1]
  // f and b: the forward and the backward pass's shares of compute_s (fit measures them from the
  // runs' step logs; older model files lack them and get the FLOP split of a decoder step).
  double forward_share = 1.0 / 3, backward_share = 2.0 / 3;
  // h: the LM head's share of each pass (plan computes it from the shape; 0 when unknown).
  double head_share = 0;
  double straggler = 0;        // s >= 0
  // Two levels: the links inside a node and between nodes, as scale-bench collectives measures
  // them with every group of the level running at once ("intra-node", "inter-node" rows). Both
  // unknown in a one-level model (the JSON then has neither "intra_node" nor "inter_node").
  Link intra, inter;
  nlohmann::json inputs = nlohmann::json::object();  // where the numbers came from (files, fits, options)

  // Throws UsageError naming the first unusable field ("model: busbw_Bps must be > 0, got 0").
  void validate() const;
  // {"format": "shardtrain-scaling-model", "version": 1, ...}. The shares and "inputs" are optional
  // when read (older model files); "intra_node", "inter_node" and "per_op" are written only when
  // known (a link unknown is Link{}, no per-operation links an empty map).
  static auto fields() {
    using namespace json_fields;
    using M = StepModel;
    return std::tuple{format_tag("format", "shardtrain-scaling-model", "scaling model"), version("version", 1),
                      constant("units", "seconds, bytes, bytes per second"), key("compute_s", &M::compute_s),
                      key("scaling", &M::scaling, names(kScalingNames)), key("tokens_per_step", &M::tokens_per_step),
                      key("collectives", &M::collectives), key("busbw_Bps", &M::busbw_Bps), key("alpha_s", &M::alpha_s),
                      key("overlap", &M::overlap), key("forward_share", &M::forward_share, kMayBeAbsent),
                      key("backward_share", &M::backward_share, kMayBeAbsent),
                      key("head_share", &M::head_share, kMayBeAbsent), key("straggler", &M::straggler),
                      key("inputs", &M::inputs, kMayBeAbsent), unless_default(key("intra_node", &M::intra)),
                      unless_default(key("inter_node", &M::inter)),
                      unless_default(key("per_op", &M::op_links, PerOpLinksCodec{}))};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  // Throws UsageError naming `source` and the missing or mistyped field by its pointer.
  static StepModel from_json(const nlohmann::json& j, const std::string& source);
};
// A model file (scale-bench fit's output, --step-model) through JsonFile and from_json: the one
// reader of the format. `what` says what the file was given as ("the --step-model step model").
StepModel read_step_model(const std::string& path, const std::string& what);

// Ring steps of one call of `op` over `world` ranks: the latency term's multiplier k above.
double ring_steps(CollectiveOp op, int world);
// Seconds of one call of `op` over `world` ranks by the ring formula above.
double collective_seconds(CollectiveOp op, double bytes, int world, double busbw_Bps, double alpha_s);

// Communication seconds of a step by the pass it hides behind, streamed or pinned.
struct PhaseComm {
  double forward_s = 0, backward_s = 0;                // streamed
  double forward_pinned_s = 0, backward_pinned_s = 0;  // pinned
  double total() const { return forward_s + backward_s + forward_pinned_s + backward_pinned_s; }
  void add(const StepCollective& c, double seconds) {
    const bool fwd = c.phase == CommPhase::kForward;
    (c.pinned ? (fwd ? forward_pinned_s : backward_pinned_s) : (fwd ? forward_s : backward_s)) += seconds;
  }
};
// `collectives` priced on the model's one-level link (each operation's, link_for) over `world`
// ranks, by pass: the one place a step's collectives become seconds on one level.
PhaseComm phase_comm(const StepModel& model, const std::vector<StepCollective>& collectives, int world);
// exposed(W) above, of `comm` against `compute_s` seconds of compute, with the model's o, f, b and h.
double exposed_comm_seconds(const StepModel& model, const PhaseComm& comm, double compute_s);

// The terms of T(W) and what follows from them.
struct StepTerms {
  int world = 1;
  double compute_s = 0, comm_s = 0, exposed_comm_s = 0, straggler_s = 0, step_s = 0;
  double intra_comm_s = 0, inter_comm_s = 0;  // predict_on: comm_s by link (0 from predict)
  double tokens_per_s = 0, speedup = 0, efficiency = 0;
  nlohmann::json to_json() const;
};
StepTerms predict(const StepModel& model, int world);  // validates the model; world >= 1

}  // namespace shardtrain::scaling
