// Internal: how the checkpoint collectives (ckpt_write.cpp, ckpt_commit.cpp) pass rank 0's verdict
// to every rank: a broadcast string, errors encoded so every rank rethrows the same exception type.
#pragma once
#include <mpi.h>

#include <exception>
#include <string>

#include "shardtrain/base/error.hpp"

namespace shardtrain::ckpt::detail {

// Rank 0's `s` to every rank of `comm` (its length, then its characters).
inline void bcast_string(std::string& s, MPI_Comm comm) {
  long long len = static_cast<long long>(s.size());
  MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, comm);
  s.resize(std::size_t(len));
  if (len > 0) MPI_Bcast(s.data(), int(len), MPI_CHAR, 0, comm);
}

// Errors cross ranks as "U:<message>" (UsageError) or "I:<message>" (IoError and anything else).
inline std::string encode_error(const std::exception& e) {
  return (dynamic_cast<const UsageError*>(&e) ? "U:" : "I:") + std::string(e.what());
}
[[noreturn]] inline void throw_encoded(const std::string& status) {
  if (status.rfind("U:", 0) == 0) throw UsageError(status.substr(2));
  throw IoError(status.substr(2));
}

}  // namespace shardtrain::ckpt::detail
