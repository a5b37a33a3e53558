# The slurm.conf settings that both test clusters share (sourced by scripts/cluster/box.sh, the
# N-node cluster in a box, and tests/scripts/slurm_cluster.sh, the one-node cluster of the Slurm
# tests), so that a setting is chosen once: munge authentication, Linux process tracking with no
# cgroups, Slurm's own MPI default (none: `srun --mpi=pmix` must be asked for, as on most clusters),
# cores as the unit of allocation, no accounting database (finished jobs stay in `scontrol show job`
# for MinJobAge and go to jobcomp/filetxt), and a node that comes back is returned to service.
# Each caller prints around it what is its own: the cluster's name, hosts, ports, users, the spool,
# pid and log files, the nodes and the partition.
#
#   slurm_conf_shared SOCKET STATE_DIR JOBCOMP_FILE KILL_WAIT_S SLURMD_TIMEOUT_S MESSAGE_TIMEOUT_S
# prints the shared lines; SOCKET is munged's socket, the timeouts are in seconds.
slurm_conf_shared() {
  cat <<EOF
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$1
StateSaveLocation=$2
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=defer_batch=0
JobCompType=jobcomp/filetxt
JobCompLoc=$3
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=3600
KillWait=$4
InactiveLimit=0
SlurmdTimeout=$5
SlurmctldTimeout=60
MessageTimeout=$6
SlurmdParameters=config_overrides
EOF
}
