// Checkpoint throughput benchmark (hidden: tag [.bench], never run by default).
//
//   SHARDTRAIN_CKPT_BENCH=1 build/bench/shardtrain_bench "[ckpt-bench]"                      # 1 rank
//   SHARDTRAIN_CKPT_BENCH=1 mpirun -np 2 -x SHARDTRAIN_CKPT_BENCH build/bench/shardtrain_bench "[ckpt-bench]"
//   SHARDTRAIN_BENCH_DIR=/scratch/x to choose the file system (default: the temp folder),
//   SHARDTRAIN_BENCH_ROUNDS=5 for more alternating rounds (default 3; medians are reported)
//
// GPT-2 small's state (d 768, 12 layers, context 1024, vocab 50,257: 124.4M parameters; params + two
// AdamW moments = 373M float32 = 1.49 GB) is saved synchronously and asynchronously and loaded back,
// against the same disk's plain rates measured in the same rounds (disks vary from run to run):
//   - write: write(2) of this rank's bytes in 64 MiB blocks + fdatasync (`dd conv=fdatasync`);
//   - cold read: read(2) in 64 MiB blocks, after the pages were dropped from the page cache
//     (posix_fadvise DONTNEED on the clean, fsync'd file; mincore confirms < 1% stayed), of that file
//     and of the checkpoint's own rank files (each rank its share, the ranks at once): the loads'
//     percentages are of the latter, read right before the cold loads in each round. JSON's
//     "dd_read_cold_gbps" and "*_vs_dd_read" are of it too.
// Loads are measured warm (the checkpoint just written, in the page cache, as a restart on the same
// node finds it) and cold (its files' pages dropped the same way: a restart on another node): as a
// resume loads now (restore_resume_checkpoint_collective: validated while read, each rank hashing
// its share of the files in the same pass that fills the state), after the ranks validated it
// together first (the resume before), after rank 0 validated it alone (before that), and unvalidated.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "test_ckpt_support.hpp"

namespace ck = shardtrain::ckpt;
namespace fs = std::filesystem;
using namespace shardtrain::test;
using namespace shardtrain::test::ckpt_fixture;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Seconds to write `bytes` from `data` with write(2) + fdatasync (dd conv=fdatasync).
double dd_write(const std::string& path, const unsigned char* data, std::size_t bytes) {
  const double t0 = now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = ::write(fd, data + done, std::min<std::size_t>(64u << 20, bytes - done));
    REQUIRE(n > 0);
    done += std::size_t(n);
  }
  REQUIRE(::fdatasync(fd) == 0);
  ::close(fd);
  return now() - t0;
}

// Share of `path`'s pages in the page cache, in [0, 1] (mincore over a read-only mapping).
double resident_fraction(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  const std::size_t bytes = std::size_t(fs::file_size(path));
  if (bytes == 0) {
    ::close(fd);
    return 0;
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  REQUIRE(map != MAP_FAILED);
  const std::size_t page = std::size_t(::sysconf(_SC_PAGESIZE)), pages = (bytes + page - 1) / page;
  std::vector<unsigned char> in(pages);
  REQUIRE(::mincore(map, bytes, in.data()) == 0);
  ::munmap(map, bytes);
  std::size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  return double(resident) / double(pages);
}

// Drops the (clean) pages of `path`, or of every file under it, from the page cache, and checks
// that they went: a "cold" figure read from memory would flatter the reader.
void drop_from_page_cache(const std::string& path) {
  std::vector<std::string> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file()) files.push_back(e.path().string());
  } else {
    files.push_back(path);
  }
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::fdatasync(fd) == 0);  // dirty pages are not dropped
    REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
    ::close(fd);
    INFO(f);
    CHECK(resident_fraction(f) < 0.01);
  }
}

// Seconds to read `path` whole with read(2) in 64 MiB blocks, from wherever its pages are.
double dd_read(const std::string& path, unsigned char* into, std::size_t bytes) {
  const double t0 = now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = ::read(fd, into + done, std::min<std::size_t>(64u << 20, bytes - done));
    REQUIRE(n > 0);
    done += std::size_t(n);
  }
  ::close(fd);
  return now() - t0;
}

// Seconds to read `path` (`bytes` long) with read(2) in 64 MiB blocks into one reused block: the
// read of a file larger than any buffer the benchmark holds (a rank file is its state plus HDF5's
// metadata), its bytes not kept.
double dd_read_through(const std::string& path, std::size_t bytes) {
  static std::vector<unsigned char> block(64u << 20);
  const double t0 = now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = ::read(fd, block.data(), std::min(block.size(), bytes - done));
    REQUIRE(n > 0);
    done += std::size_t(n);
  }
  ::close(fd);
  return now() - t0;
}

// GPT-2 small's state (parameters and the two AdamW moments) in one flat buffer, each rank's
// spread share of it as the pieces a DDP rank saves.
struct Gpt2SmallState {
  std::vector<ck::TensorSpec> specs;
  std::vector<float> flat;
  std::vector<const void*> ptrs;  // per spec, into flat
  std::vector<ck::PieceView> pieces;
  std::int64_t numel = 0;

  Gpt2SmallState(int world, int rank) {
    const int C = 768, L = 12, V = 50257, T = 1024;
    std::vector<ck::TensorSpec> params = {{"wte", {V, C}}, {"wpe", {T, C}}};
    for (int l = 0; l < L; ++l) {
      const std::string h = "h." + std::to_string(l) + ".";
      for (auto s : std::vector<ck::TensorSpec>{{h + "ln_1.weight", {C}},          {h + "ln_1.bias", {C}},
                                                {h + "attn.qkv.weight", {3 * C, C}}, {h + "attn.qkv.bias", {3 * C}},
                                                {h + "attn.proj.weight", {C, C}},    {h + "attn.proj.bias", {C}},
                                                {h + "ln_2.weight", {C}},            {h + "ln_2.bias", {C}},
                                                {h + "mlp.fc.weight", {4 * C, C}},   {h + "mlp.fc.bias", {4 * C}},
                                                {h + "mlp.proj.weight", {C, 4 * C}}, {h + "mlp.proj.bias", {C}}})
        params.push_back(s);
    }
    params.push_back({"ln_f.weight", {C}});
    params.push_back({"ln_f.bias", {C}});
    specs = params;
    for (const auto& p : params) specs.push_back({"optim.exp_avg." + p.name, p.shape});
    for (const auto& p : params) specs.push_back({"optim.exp_avg_sq." + p.name, p.shape});
    for (const auto& s : specs) numel += s.numel();
    flat.resize(static_cast<std::size_t>(numel));
    for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = float(std::int64_t(i * 2654435761u % 100003u) - 50000) * 1e-5f;
    std::int64_t off = 0;
    for (const auto& s : specs) {
      ptrs.push_back(flat.data() + off);
      off += s.numel();
    }
    pieces = ck::spread_pieces(specs, ptrs, world, rank);
  }
  std::size_t total_bytes() const { return std::size_t(numel) * 4; }
  // Where spec i lies in a buffer laid out as flat.
  float* in(std::vector<float>& buffer, std::size_t i) const {
    return buffer.data() + (static_cast<const float*>(ptrs[i]) - flat.data());
  }
};

// How a load is validated: as a resume validates now (kWhileReading: restore_resume_checkpoint_
// collective, each rank hashing its share of the files in the pass that fills the state), before
// it (kTogether: find_resume_checkpoint_collective, each rank its share of the files, then the
// load), before that (kRank0Alone: rank 0 hashes every file while the others wait), or not at all
// (kNone); the last three read tensor by tensor as the resume did.
enum class Validation { kNone, kRank0Alone, kTogether, kWhileReading };

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The benchmark's rounds and its report; every time in seconds, each a list over the rounds.
class CkptBench {
 public:
  CkptBench(shardtrain::Communicator& comm, std::string dir, const Gpt2SmallState& state)
      : comm_(comm), rank_(comm.rank()), world_(comm.size()), dir_(std::move(dir)), state_(state),
        back_(state.flat.size()), manifest_(make_manifest(100, comm.size())) {
    for (std::size_t i = 0; i < state.specs.size(); ++i)
      whole_state_.push_back({state.specs[i].name, 0, state.specs[i].numel(), state.in(back_, i)});
    for (const auto& p : state.pieces) my_bytes_ += std::size_t(p.count) * 4;
  }

  // One round, alternating (the disk's speed drifts): dd-style write and cold read of this rank's
  // share, a synchronous save, then the loads warm and cold.
  void round(int i) {
    const unsigned char* my_data = static_cast<const unsigned char*>(state_.pieces.front().data);
    const std::string dd_path = dir_ + "/dd." + std::to_string(rank_);
    comm_.barrier();
    double t0 = now();
    dd_write(dd_path, my_data, my_bytes_);
    comm_.barrier();
    dd_s_.push_back(now() - t0);
    drop_from_page_cache(dd_path);
    comm_.barrier();
    t0 = now();
    dd_read(dd_path, reinterpret_cast<unsigned char*>(back_.data()), my_bytes_);
    comm_.barrier();
    dd_read_s_.push_back(now() - t0);
    CHECK(std::memcmp(back_.data(), my_data, my_bytes_) == 0);
    fs::remove(dd_path);

    manifest_.step = 100 + i;
    t0 = now();
    saved_ = ck::save_checkpoint(dir_, manifest_, state_.specs, state_.pieces, comm_, ck::SaveOptions{true, 1});
    save_s_.push_back(now() - t0);

    load_while_s_.push_back(load(Validation::kWhileReading));
    load_s_.push_back(load(Validation::kTogether, &open_s_));
    load_alone_s_.push_back(load(Validation::kRank0Alone));
    load_fast_s_.push_back(load(Validation::kNone));
    drop_checkpoint();
    files_read_s_.push_back(read_files_cold());
    drop_checkpoint();
    cold_load_while_s_.push_back(load(Validation::kWhileReading));
    drop_checkpoint();
    cold_load_s_.push_back(load(Validation::kTogether, &cold_open_s_));
    drop_checkpoint();
    cold_load_alone_s_.push_back(load(Validation::kRank0Alone));
    drop_checkpoint();
    cold_load_fast_s_.push_back(load(Validation::kNone));
  }

  // Asynchronous saves: the stall is the wait for the previous save plus the snapshot copy. The
  // first save allocates the snapshot buffer; later ones reuse it (steady state).
  void async_saves() {
    ck::AsyncCheckpointWriter writer(dir_, comm_, ck::SaveOptions{true, 1});
    for (int i = 0; i < 3; ++i) {
      manifest_.step = 200 + i;
      const double t0 = now();
      stalls_.push_back(writer.save(manifest_, state_.specs, state_.pieces));
      writer.wait();
      async_total_.push_back(now() - t0);
    }
  }

  void report(int rounds) const;

 private:
  // Every rank loads the whole state (as DDP ranks do); the memcmp checks the load returned what
  // was saved. With `validation_s`, the time to the end of the validation goes there too.
  double load(Validation validation, std::vector<double>* validation_s = nullptr) {
    comm_.barrier();
    const double t0 = now();
    if (validation == Validation::kWhileReading) {
      const auto restored = ck::restore_resume_checkpoint_collective(
          dir_, comm_, {}, [&](const ck::CheckpointReader& reader) { reader.read_batch(whole_state_); });
      REQUIRE((restored.folder && *restored.folder == saved_.path && !restored.restored_then_refused));
      comm_.barrier();
      const double t = now() - t0;
      CHECK(std::memcmp(back_.data(), state_.flat.data(), state_.total_bytes()) == 0);
      return t;
    }
    if (validation == Validation::kTogether) {
      const auto chosen = ck::find_resume_checkpoint_collective(dir_, comm_);
      REQUIRE((chosen && *chosen == saved_.path));
    } else if (validation == Validation::kRank0Alone && rank_ == 0) {
      ck::CheckpointReader validated(saved_.path);
    }
    comm_.barrier();
    if (validation_s) validation_s->push_back(now() - t0);
    ck::ReadOptions options;
    options.verify_files = false;
    {
      ck::CheckpointReader reader(saved_.path, options);  // as the resume before read: tensor by tensor
      for (std::size_t i = 0; i < state_.specs.size(); ++i) reader.read(state_.specs[i].name, state_.in(back_, i));
    }
    comm_.barrier();
    const double t = now() - t0;
    CHECK(std::memcmp(back_.data(), state_.flat.data(), state_.total_bytes()) == 0);
    return t;
  }

  void drop_checkpoint() {
    comm_.barrier();
    if (rank_ == 0) drop_from_page_cache(saved_.path);
    comm_.barrier();
  }

  // The same bytes read the plain way right before the cold loads: the checkpoint's rank files, each
  // rank its share (file i on rank i mod W), read(2) in 64 MiB blocks, the ranks at once. Disks
  // differ from file to file and minute to minute: this is the read a load is held against.
  double read_files_cold() {
    ck::ReadOptions unverified;
    unverified.verify_files = false;
    const auto files = ck::CheckpointReader(saved_.path, unverified).manifest().files;
    drop_checkpoint();
    const double t0 = now();
    for (std::size_t i = 0; i < files.size(); ++i)
      if (int(i % std::size_t(world_)) == rank_)
        dd_read_through(saved_.path + "/" + files[i].name, std::size_t(files[i].bytes));
    comm_.barrier();
    return now() - t0;
  }

  shardtrain::Communicator& comm_;
  const int rank_, world_;
  const std::string dir_;
  const Gpt2SmallState& state_;
  std::vector<float> back_;
  std::vector<ck::ReadRequest> whole_state_;
  std::size_t my_bytes_ = 0;
  ck::CheckpointManifest manifest_;
  ck::SaveResult saved_;
  std::vector<double> dd_s_, dd_read_s_, save_s_, load_s_, open_s_, cold_open_s_, load_fast_s_, cold_load_s_,
      cold_load_fast_s_, load_alone_s_, cold_load_alone_s_, load_while_s_, cold_load_while_s_, files_read_s_;
  std::vector<double> stalls_, async_total_;
};

// Rank 0's table (seconds, GB/s, against the disk's plain write or the cold read of the files) and
// its one JSON line.
void CkptBench::report(int rounds) const {
  const double gb = double(state_.total_bytes()) / 1e9;
  const double dd_bw = gb / median(dd_s_);
  std::printf("# checkpoint throughput, %d rank(s), %.1fM parameters, %.3f GB of float32 state, folder %s\n", world_,
              double(state_.numel) / 3e6, gb, dir_.c_str());
  std::printf("# medians of %d rounds (dd write, cold dd read, save, loads alternating)\n", rounds);
  const double dd_read_bw = gb / median(files_read_s_);
  std::printf("%-34s %10s %10s %10s\n", "# measurement", "seconds", "GB/s", "vs dd");
  auto row = [&](const char* what, double sec) {
    std::printf("%-34s %10.3f %10.3f %9.0f%%\n", what, sec, gb / sec, 100.0 * (gb / sec) / dd_bw);
  };
  auto read_row = [&](const char* what, double sec) {
    std::printf("%-34s %10.3f %10.3f %9.0f%% of the cold read of its files\n", what, sec, gb / sec,
                100.0 * (gb / sec) / dd_read_bw);
  };
  for (std::size_t i = 0; i < dd_s_.size(); ++i)
    std::printf("#   round %zu: dd write %.3f s, dd cold read %.3f s, save %.3f s, cold read of its files %.3f s, "
                "cold load validated while read %.3f s, together %.3f s\n", i, dd_s_[i], dd_read_s_[i], save_s_[i],
                files_read_s_[i], cold_load_while_s_[i], cold_load_s_[i]);
  row("dd write+fdatasync", median(dd_s_));
  row("save (sync, commit included)", median(save_s_));
  std::printf("%-34s %10s   (last: write %.3f, fsync+hash %.3f, commit %.3f on rank 0)\n", "  of which", "",
              saved_.write_s, saved_.sync_s, saved_.commit_s);
  row("async save, total (3rd)", async_total_.back());
  std::printf("%-34s %10.3f   (first, allocating: %.3f)  = %.1f%% of the sync save\n", "async stall (2nd/3rd save)",
              stalls_.back(), stalls_.front(), 100.0 * stalls_.back() / median(save_s_));
  read_row("dd read, cold (a new file)", median(dd_read_s_));
  read_row("cold read of its files", median(files_read_s_));
  read_row("load, warm (validated while read)", median(load_while_s_));
  read_row("load, warm (validated together)", median(load_s_));
  std::printf("%-34s %10.3f\n", "  of which validation", median(open_s_));
  read_row("load, warm (rank 0 validates)", median(load_alone_s_));
  read_row("load, warm (no file re-hash)", median(load_fast_s_));
  read_row("load, cold (validated while read)", median(cold_load_while_s_));
  read_row("load, cold (validated together)", median(cold_load_s_));
  std::printf("%-34s %10.3f\n", "  of which validation", median(cold_open_s_));
  read_row("load, cold (rank 0 validates)", median(cold_load_alone_s_));
  read_row("load, cold (no file re-hash)", median(cold_load_fast_s_));
  std::printf("{\"ranks\":%d,\"bytes\":%zu,\"dd_gbps\":%.3f,\"save_gbps\":%.3f,\"save_vs_dd\":%.3f,"
              "\"async_stall_s\":%.3f,\"sync_save_s\":%.3f,\"stall_vs_sync\":%.3f,\"dd_read_cold_gbps\":%.3f,"
              "\"load_gbps\":%.3f,\"load_noverify_gbps\":%.3f,\"cold_load_gbps\":%.3f,\"cold_load_noverify_gbps\":%.3f,"
              "\"cold_load_vs_dd_read\":%.3f,\"load_rank0_alone_gbps\":%.3f,\"cold_load_rank0_alone_gbps\":%.3f,"
              "\"cold_load_while_read_gbps\":%.3f,\"cold_load_while_read_vs_dd_read\":%.3f,\"dd_read_new_file_gbps\":%.3f}\n",
              world_, state_.total_bytes(), dd_bw, gb / median(save_s_), (gb / median(save_s_)) / dd_bw, stalls_.back(),
              median(save_s_), stalls_.back() / median(save_s_), dd_read_bw, gb / median(load_s_),
              gb / median(load_fast_s_), gb / median(cold_load_s_), gb / median(cold_load_fast_s_),
              (gb / median(cold_load_s_)) / dd_read_bw, gb / median(load_alone_s_), gb / median(cold_load_alone_s_),
              gb / median(cold_load_while_s_), (gb / median(cold_load_while_s_)) / dd_read_bw, gb / median(dd_read_s_));
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("ckpt: save and load throughput of GPT-2 small's state against the disk", "[.bench][ckpt-bench]") {
  // Also opt-in by environment: ctest's discovery of the non-[mpi] cases registers hidden tests too.
  if (!std::getenv("SHARDTRAIN_CKPT_BENCH")) {
    WARN("skipped: set SHARDTRAIN_CKPT_BENCH=1 to run the checkpoint benchmark (about a minute, 4.5 GB of RAM per rank)");
    return;
  }
  auto [rank, world, dir, comm] = mpi_case("ckpt-bench");
  const char* env = std::getenv("SHARDTRAIN_BENCH_DIR");
  if (env) dir = std::string(env) + "/ckpt-bench";
  const Gpt2SmallState state(world, rank);  // every rank holds it all (DDP), each writes its spread share
  const char* reps_env = std::getenv("SHARDTRAIN_BENCH_ROUNDS");
  const int rounds = reps_env ? std::max(1, std::atoi(reps_env)) : 3;
  comm->barrier();
  if (rank == 0) fs::create_directories(dir);
  comm->barrier();
  CkptBench bench(*comm, dir, state);
  for (int round = 0; round < rounds; ++round) bench.round(round);
  bench.async_saves();
  if (rank == 0) {
    bench.report(rounds);
    if (env) fs::remove_all(dir);
  }
  comm->barrier();
}
