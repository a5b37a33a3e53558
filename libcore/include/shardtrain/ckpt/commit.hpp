// Durable file-system steps of the commit, the `latest` pointer, resume selection and pruning.
//
// `latest` is a small text file holding the committed folder's name and a newline
// ("step_00000100\n"), replaced atomically (latest.tmp, fsync, rename, fsync of the folder). A text
// file rather than a symlink: `cat` and scripts read it the same way everywhere, and it survives
// copies to file systems and archives that drop or rewrite symlinks.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/ckpt/read.hpp"
#include "shardtrain/comm/communicator.hpp"

namespace shardtrain::ckpt {

// The folder name `latest` holds ("" when there is no `latest`). Throws IoError if unreadable.
std::string read_latest(const std::string& ckpt_dir);
void write_latest(const std::string& ckpt_dir, const std::string& folder_name);

// Committed step folders (names matching step_<8 digits> exactly), newest (highest step) first.
std::vector<std::string> list_checkpoints(const std::string& ckpt_dir);

// `--resume auto`: the checkpoint to resume from, or nullopt when there is none (a fresh start).
// Tries the folder `latest` names first, then every committed folder newest first; each candidate is
// fully validated (CheckpointReader with `options`). Logs one line per problem, naming the folder or
// file and the fault: a `latest` that names a missing folder, each corrupt checkpoint it skips, and
// the step_N.tmp folders of interrupted saves it ignores; then one line naming the choice.
// Read-only (never deletes). Throws UsageError only if ckpt_dir exists and is not a folder.
std::optional<std::string> find_resume_checkpoint(const std::string& ckpt_dir, const ReadOptions& options = {});

// Collective over `comm`: find_resume_checkpoint with rank 0 walking the candidates (its view of the
// folder decides their order and it alone logs) and every rank judging each candidate with it: with
// verify_files, each rank hashes its share of the rank files and adds up their pieces
// (ReadOptions::share), the shares' sums are added up on every rank, so W ranks validate a
// W-file checkpoint in about 1/W of the time one rank takes. Every rank returns the same folder,
// or throws the same UsageError. Use with ReadOptions{verify_files=false} when opening the folder
// afterwards: every byte of it has been verified once.
std::optional<std::string> find_resume_checkpoint_collective(const std::string& ckpt_dir, Communicator& comm,
                                                             const ReadOptions& options = {});

// find_resume_checkpoint_collective with the restore folded into the validation, so a resume reads
// each byte from the disk once: every rank opens a candidate with its share of the hashing left to
// the reads (ReadOptions::hash_while_reading; options.verify_files must be set), `restore` reads what
// the rank holds through CheckpointReader::read_batch (local reads only: no collective, since another
// rank may have refused the candidate), the rank hashes what its share has left, and the ranks agree.
// A candidate any rank refuses (at open, in `restore`, or by a hash) is skipped and logged as
// find_resume_checkpoint skips it, and `restore` is called again with the next one: it must set all
// the state it restores each time. The same answer on every rank; throws the same UsageError.
struct CollectiveRestore {
  std::optional<std::string> folder;     // restored from (nullopt: no valid checkpoint)
  bool restored_then_refused = false;    // `restore` ran on a candidate that was refused: when folder is
                                         // nullopt, what it wrote must be discarded by the caller
};
CollectiveRestore restore_resume_checkpoint_collective(const std::string& ckpt_dir, Communicator& comm,
                                                       const ReadOptions& options,
                                                       const std::function<void(const CheckpointReader&)>& restore);

// `--keep K`: removes committed checkpoints beyond the newest `keep` (by step), but never the one
// find_resume_checkpoint would pick with the same `options` (the same choice: the one `latest` names
// if valid, else the newest valid one, which may be older than the newest K when those are corrupt);
// also removes leftovers of interrupted saves (*.tmp) and deletions (*.deleting).
// `known_valid`: a folder name the caller has just committed (kept instead of re-validating to find
// that choice). Each removal renames the folder to <name>.deleting first, so a half-removed
// checkpoint never looks committed. Run it on one rank, never during a save. Returns removed names.
// keep < 1: UsageError.
std::vector<std::string> prune_checkpoints(const std::string& ckpt_dir, int keep,
                                           const std::string& known_valid = "", const ReadOptions& options = {});

}  // namespace shardtrain::ckpt
