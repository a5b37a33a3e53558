// The comm engine's header agreement (engine.cpp): before any data of an operation moves, the
// ranks of the group exchange its header (Driver::exchange_headers, algorithms.hpp: sequence
// number, operation, type, count, root) and check that they all hold the same one. When they do
// not, the ranks holding the strict majority's header name the others, and the table of every
// rank's header goes into the flight record's trigger ("agreement", FORMATS.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms.hpp"
#include "shardtrain/comm/communicator.hpp"

namespace shardtrain::comm_detail {

// Ranks that disagree on an operation (the header exchange, algorithms.hpp): the message, and the
// table of every rank's header for the flight record's trigger ("agreement", FORMATS.md).
class Disagreement : public CommunicationError {
 public:
  Disagreement(const std::string& what, nlohmann::json detail) : CommunicationError(what), detail(std::move(detail)) {}
  nlohmann::json detail;
};

using OpHeader = Driver::OpHeader;

// The header of request `r` as the `seq`-th operation of its group.
OpHeader header_of(const Communicator::Request& r, std::uint64_t seq);

// "AllReduce seq 12 of 99 float32 elements" (root and unknown codes as such).
std::string header_text(const OpHeader& h);

// Throws Disagreement when the headers of `all` (by group rank) are not all equal. The ranks that
// hold the strict majority's header name the others as the source of input they cannot trust
// ("untrusted input from world rank R"); a rank outside the majority says its own header is the odd
// one; without a majority every rank lists every header. `me`: this rank's group rank;
// `world_ranks`: the group's ranks in the world, by group rank.
void check_agreement(const std::vector<OpHeader>& all, int me, const std::vector<int>& world_ranks);

}  // namespace shardtrain::comm_detail
