#include "header_agreement.hpp"

#include <algorithm>

namespace shardtrain::comm_detail {

OpHeader header_of(const Communicator::Request& r, std::uint64_t seq) {
  return {seq, std::uint64_t(r.op), std::uint64_t(r.dtype), std::uint64_t(r.count), std::int64_t(r.root)};
}

std::string header_text(const OpHeader& h) {
  std::string op = h.op < std::uint64_t(kNumCollectiveOps) ? op_name(CollectiveOp(int(h.op))) : "op#" + std::to_string(h.op);
  std::string dtype = h.dtype <= std::uint64_t(DType::kUInt8) ? dtype_name(DType(int(h.dtype))) : "dtype#" + std::to_string(h.dtype);
  std::string text = op + " seq " + std::to_string(h.seq) + " of " + std::to_string(h.count) + " " + dtype + " elements";
  if (h.root >= 0) text += " (root " + std::to_string(h.root) + ")";
  return text;
}

void check_agreement(const std::vector<OpHeader>& all, int me, const std::vector<int>& world_ranks) {
  if (std::all_of(all.begin(), all.end(), [&](const OpHeader& h) { return h == all[0]; })) return;
  const int W = int(all.size());
  int majority = -1;  // a group rank holding the strict majority's header
  for (int q = 0; q < W && majority < 0; ++q)
    if (2 * std::count(all.begin(), all.end(), all[std::size_t(q)]) > W) majority = q;
  nlohmann::json headers = nlohmann::json::array();
  std::vector<int> odd;  // world ranks outside the majority (all, without one)
  for (int q = 0; q < W; ++q) {
    const OpHeader& h = all[std::size_t(q)];
    headers.push_back({{"group_rank", q}, {"world_rank", world_ranks[std::size_t(q)]},
                       {"seq", h.seq}, {"op", h.op < std::uint64_t(kNumCollectiveOps) ? op_name(CollectiveOp(int(h.op))) : "?"},
                       {"dtype", h.dtype <= std::uint64_t(DType::kUInt8) ? dtype_name(DType(int(h.dtype))) : "?"},
                       {"numel", h.count}, {"root", h.root}});
    if (majority < 0 || !(h == all[std::size_t(majority)])) odd.push_back(world_ranks[std::size_t(q)]);
  }
  std::string list;
  for (int w : odd) list += (list.empty() ? "" : ", ") + std::to_string(w);
  nlohmann::json detail = {{"headers", headers}, {"majority", majority >= 0}, {"disagreeing_world_ranks", odd}};
  std::string message;
  if (majority < 0) {
    message = "the ranks disagree on this collective and no header has a majority:";
    for (int q = 0; q < W; ++q)
      message += std::string(q ? ";" : "") + " world rank " + std::to_string(world_ranks[std::size_t(q)]) + " " +
                 header_text(all[std::size_t(q)]);
  } else if (all[std::size_t(me)] == all[std::size_t(majority)]) {
    detail["untrusted_input_from"] = odd;
    message = "untrusted input from world rank(s) " + list + ": ";
    for (std::size_t i = 0; i < odd.size(); ++i) {
      const auto q = std::size_t(std::find(world_ranks.begin(), world_ranks.end(), odd[i]) - world_ranks.begin());
      message += std::string(i ? "; " : "") + "world rank " + std::to_string(odd[i]) + " has " + header_text(all[q]);
    }
    message += ", this rank and the majority " + header_text(all[std::size_t(majority)]);
  } else {
    message = "this rank's " + header_text(all[std::size_t(me)]) + " disagrees with the majority's " +
              header_text(all[std::size_t(majority)]);
  }
  throw Disagreement(message + " (checked before any data moved)", std::move(detail));
}

}  // namespace shardtrain::comm_detail
