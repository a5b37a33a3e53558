// Errors: one hierarchy, each class carrying the process exit code a tool returns for it.
// The library never exits; it throws one of these with enough context (file, field, rank, step)
// for a one-line message, and the tool's shared main turns it into "[rank R/W] error: ..." + exit.
#pragma once
#include <stdexcept>
#include <string>

namespace shardtrain {

// Exit codes used by every tool (documented in each man page's EXIT STATUS).
enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,       // the job ran and failed a check (a DIFFERENT verdict, a diverged replica, NaN loss)
  kUsage = 2,         // bad command line, config or input data: fix the input and rerun
  kIo = 3,            // a file could not be read or written (missing, permission, disk full)
  kCommunication = 4, // a collective timed out or a peer failed; restart from the last checkpoint
  kInternal = 70,     // a bug: please report it
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// Bad configuration, option or input content (a malformed dataset line, an invalid model size).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(ExitCode::kUsage, what) {}
};

// A file-system failure: missing file, unreadable, short write, full disk.
class IoError : public Error {
 public:
  explicit IoError(const std::string& what) : Error(ExitCode::kIo, what) {}
};

// A collective timed out or a peer went away.
class CommunicationError : public Error {
 public:
  explicit CommunicationError(const std::string& what) : Error(ExitCode::kCommunication, what) {}
};

// Training produced an unusable result (non-finite loss or gradient norm).
class NumericalError : public Error {
 public:
  explicit NumericalError(const std::string& what) : Error(ExitCode::kFailure, what) {}
};

}  // namespace shardtrain
