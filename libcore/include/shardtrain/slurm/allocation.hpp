// A Slurm batch job's allocation, as Slurm describes it to the job, and the ranks it can run now.
// The pure parts (the task-count syntax, the sum over live nodes) are separate from the two
// commands that ask Slurm (scontrol show hostnames, squeue), so that they are unit-tested.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::slurm {

// SLURM_TASKS_PER_NODE, e.g. "2(x3),1": two tasks on each of three nodes, then one; one count per
// node, in the order of SLURM_JOB_NODELIST. UsageError naming the text when it is not that syntax.
std::vector<int> parse_tasks_per_node(const std::string& text);

// The tasks of the job's nodes that are still live: `job_nodes` (SLURM_JOB_NODELIST expanded) and
// `tasks_per_node` pair up by position (a node past the counts holds none); `live_nodes` are the
// nodes the job holds now (after a node failure under --no-kill, squeue lists only the live ones).
int live_task_count(const std::vector<std::string>& job_nodes, const std::vector<int>& tasks_per_node,
                    const std::vector<std::string>& live_nodes);

// One host name per node of a Slurm host list ("node[1-3],gpu7"): `scontrol show hostnames LIST`.
// IoError when scontrol is missing or fails.
std::vector<std::string> expand_host_list(const std::string& list);

// The nodes job `job_id` holds now, one name each: squeue's node list (-o %N) expanded (a lost node
// leaves it once Slurm marks it DOWN). IoError when a command fails.
std::vector<std::string> live_nodes(const std::string& job_id);

// The ranks job `job_id` can run now, from the environment Slurm gives the batch script
// (SLURM_TASKS_PER_NODE, else SLURM_NTASKS; SLURM_JOB_NODELIST) and squeue's live node list.
// IoError when a command fails; UsageError when the environment is malformed.
int live_ranks_now(const std::string& job_id);

// slurmd's port inside a Slurm job: SLURM_JOB_ID set and `scontrol show config` names SlurmdPort
// (6818, Slurm's default, when scontrol runs but names none); nothing outside a Slurm job or
// without scontrol. (The launcher probes it to tell a lost node from a cut-off one.)
std::optional<int> slurmd_port();

}  // namespace shardtrain::slurm
