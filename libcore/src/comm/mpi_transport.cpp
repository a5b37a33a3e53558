// The MPI transport (transport.hpp) and make_mpi_communicator (mpi.hpp): every MPI call of the comm
// layer is in this file.
#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <type_traits>

#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/comm/transport.hpp"

namespace shardtrain {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kUInt64: return MPI_UINT64_T;
    case DType::kUInt8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

// TransportRequest <-> MPI_Request: the handle is stored bit for bit (a pointer in Open MPI, an int
// in MPICH).
static_assert(sizeof(MPI_Request) <= sizeof(TransportRequest::word) && std::is_trivially_copyable_v<MPI_Request>);
TransportRequest wrap(MPI_Request r) {
  TransportRequest t;
  std::memcpy(&t.word, &r, sizeof r);
  return t;
}
MPI_Request unwrap(TransportRequest t) {
  MPI_Request r;
  std::memcpy(&r, &t.word, sizeof r);
  return r;
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, std::size_t(std::max(length, 0)));
}

// A call that returned an error (the communicator returns errors rather than aborting, so a
// refused operation fails its group and dumps the flight record like a timeout).
void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw CommunicationError(std::string(call) + " failed: " + mpi_error_text(code));
}

class MpiTransport final : public Transport {
 public:
  // Adopts `comm` (private to this transport: a duplicate or a split result).
  explicit MpiTransport(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
    // World rank of every group rank.
    MPI_Group group, world;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> local(size_);
    world_ranks_.resize(size_);
    for (int i = 0; i < size_; ++i) local[i] = i;
    MPI_Group_translate_ranks(group, size_, local.data(), world, world_ranks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    int* tag_ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &found);
    max_tag_ = found && tag_ub ? *tag_ub : 32767;
  }

  ~MpiTransport() override {
    // An abandoned request still references the communicator: freeing it would be erroneous, and
    // after MPI_Finalize nothing may be freed.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!abandoned_ && !finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int world_rank() const override { return world_rank_; }
  int world_size() const override { return world_size_; }
  std::vector<int> world_ranks() const override { return world_ranks_; }
  const char* library_name() const override { return "mpi"; }
  int max_tag() const override { return max_tag_; }
  std::size_t max_count() const override { return std::size_t(INT_MAX); }  // MPI counts are int

  TransportRequest isend(const void* data, std::size_t count, DType dtype, int peer, int tag) override {
    MPI_Request r;
    check(MPI_Isend(data, int(count), mpi_type(dtype), peer, tag, comm_, &r), "MPI_Isend");
    return wrap(r);
  }
  TransportRequest irecv(void* data, std::size_t count, DType dtype, int peer, int tag) override {
    MPI_Request r;
    check(MPI_Irecv(data, int(count), mpi_type(dtype), peer, tag, comm_, &r), "MPI_Irecv");
    receives_.push_back({r, count, dtype, peer});
    return wrap(r);
  }
  TransportRequest iall_reduce(void* data, std::size_t count, DType dtype) override {
    MPI_Request r;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(count), mpi_type(dtype), MPI_SUM, comm_, &r), "MPI_Iallreduce");
    return wrap(r);
  }
  TransportRequest ireduce_scatter(const void* in, void* out, std::size_t block, DType dtype) override {
    MPI_Request r;
    check(MPI_Ireduce_scatter_block(in, out, int(block), mpi_type(dtype), MPI_SUM, comm_, &r), "MPI_Ireduce_scatter_block");
    return wrap(r);
  }
  TransportRequest iall_gather(const void* in, void* out, std::size_t block, DType dtype) override {
    MPI_Request r;
    check(MPI_Iallgather(in, int(block), mpi_type(dtype), out, int(block), mpi_type(dtype), comm_, &r), "MPI_Iallgather");
    return wrap(r);
  }
  TransportRequest ibarrier() override {
    MPI_Request r;
    check(MPI_Ibarrier(comm_, &r), "MPI_Ibarrier");
    return wrap(r);
  }

  bool test_all(TransportRequest* requests, int n) override {
    static constexpr int kMax = 4;  // the engine tests at most two at once (a send and a receive)
    MPI_Request r[kMax] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (n > kMax) throw CommunicationError("MPI transport: test_all of more than 4 requests");
    for (int i = 0; i < n; ++i) r[i] = unwrap(requests[i]);
    MPI_Request before[kMax];  // the handles as posted: MPI_Testall replaces spent ones by MPI_REQUEST_NULL
    std::copy(r, r + kMax, before);
    int flag = 0;
    MPI_Status status[kMax];
    const int code = MPI_Testall(n, r, &flag, status);
    for (int i = 0; i < n; ++i) requests[i] = wrap(r[i]);  // MPI_REQUEST_NULL once spent
    if (code == MPI_ERR_IN_STATUS) {
      for (int i = 0; i < n; ++i)
        if (status[i].MPI_ERROR != MPI_SUCCESS && status[i].MPI_ERROR != MPI_ERR_PENDING)
          throw CommunicationError(failed_request_text(before[i], status[i]));
    }
    check(code, "MPI_Testall");
    if (flag)
      for (int i = 0; i < n; ++i) check_received_count(before[i], status[i]);
    return flag != 0;
  }

  std::unique_ptr<Transport> split(int color, int key) override {
    MPI_Comm child = MPI_COMM_NULL;
    MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child);
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiTransport>(child);
  }

  void abandon() override { abandoned_ = true; }

 private:
  // A posted receive, until it completes: what it expects, so a message of another size (ranks
  // that disagree on a collective's size) is an error rather than silently short data.
  struct Receive {
    MPI_Request request;
    std::size_t count;
    DType dtype;
    int peer;
  };

  // Takes the completed `request` out of receives_ and checks that its message had the expected
  // size; a send is not a receive and passes.
  void check_received_count(MPI_Request request, const MPI_Status& status) {
    auto it = std::find_if(receives_.begin(), receives_.end(), [&](const Receive& x) { return x.request == request; });
    if (it == receives_.end()) return;
    const Receive expected = *it;
    receives_.erase(it);
    int got = 0;
    MPI_Get_count(&status, mpi_type(expected.dtype), &got);
    if (got != int(expected.count))
      throw CommunicationError(size_disagreement("received " + std::to_string(got), expected));
  }

  std::string failed_request_text(MPI_Request request, const MPI_Status& status) {
    auto it = std::find_if(receives_.begin(), receives_.end(), [&](const Receive& x) { return x.request == request; });
    if (it != receives_.end() && status.MPI_ERROR == MPI_ERR_TRUNCATE)
      return size_disagreement("received a longer message", *it);
    return "MPI request failed: " + mpi_error_text(status.MPI_ERROR);
  }

  // "<what> from group rank P, expected N float32 elements: the ranks disagree on this collective's size"
  static std::string size_disagreement(std::string what, const Receive& expected) {
    what += " from group rank ";
    what += std::to_string(expected.peer);
    what += ", expected ";
    what += std::to_string(expected.count);
    what += ' ';
    what += dtype_name(expected.dtype);
    what += " elements: the ranks disagree on this collective's size";
    return what;
  }

  std::vector<Receive> receives_;  // communication thread only
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, world_rank_ = 0, world_size_ = 1, max_tag_ = 32767;
  std::vector<int> world_ranks_;
  bool abandoned_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm base, CommOptions options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw UsageError("MPI communicator: MPI is not initialised (call MPI_Init_thread with MPI_THREAD_MULTIPLE first)");
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    const char* names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"};
    const char* got = provided >= 0 && provided <= 3 ? names[provided] : "unknown";
    throw UsageError(std::string("MPI communicator needs MPI_THREAD_MULTIPLE (a communication thread and a watchdog "
                                 "per communicator); this MPI library provided ") +
                     got + ": use an MPI built with thread support (Open MPI: --enable-mpi-thread-multiple)");
  }
  // Errors on the base group (and MPI_COMM_WORLD, whose handler the library uses where no
  // communicator applies) return to the caller: the default handler would end the rank from inside
  // the library (Open MPI exits with the error class, e.g. 15) before any flight record is written.
  MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN);
  if (base != MPI_COMM_WORLD) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm comm = MPI_COMM_NULL;
  if (MPI_Comm_dup(base, &comm) != MPI_SUCCESS) throw CommunicationError("MPI_Comm_dup failed");
  return make_communicator(std::make_unique<MpiTransport>(comm), std::move(options));
}

FatalHook mpi_abort_on_fatal() {
  return [](const CommunicationError&) { MPI_Abort(MPI_COMM_WORLD, static_cast<int>(ExitCode::kCommunication)); };
}

}  // namespace shardtrain
