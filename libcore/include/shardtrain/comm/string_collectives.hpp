// Small collectives of strings over the Communicator (sequence number, timeout, flight record like
// every other collective of a job), for protocols where rank 0 decides and every rank must learn
// the verdict (the checkpoint commit, ckpt-reshard): rank 0's string broadcast, every rank's report
// gathered as strings, and errors encoded so that every rank rethrows the same exception type.
#pragma once
#include <exception>
#include <string>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

// Rank 0's `s` to every rank of `comm`: its length (one int64), then its bytes (none when empty).
void broadcast_string(std::string& s, Communicator& comm);

// Every rank's `mine`, in rank order, on every rank. Lengths first (one int64 per rank), then one
// all-gather of the strings padded to the longest: each rank receives size() x longest bytes. The
// strings are short reports (the checkpoint's per-rank save reports: a file record plus a piece
// table, a few tens of KB at most), so the padding costs less than a second round trip would.
std::vector<std::string> all_gather_strings(const std::string& mine, Communicator& comm);

// Errors cross ranks as "U:<message>" (UsageError) or "I:<message>" (IoError and anything else).
inline std::string encode_error(const std::exception& e) {
  return (dynamic_cast<const UsageError*>(&e) ? "U:" : "I:") + std::string(e.what());
}
[[noreturn]] inline void throw_encoded(const std::string& status) {
  if (status.rfind("U:", 0) == 0) throw UsageError(status.substr(2));
  throw IoError(status.substr(2));
}

}  // namespace shardtrain
