# jobs/local/env.sh — where the local one-node Slurm (jobs/local/up) keeps its
# files.  Sourced by jobs/local/up and jobs/local/down; set
# PLATEAU_SLURM_DIR to move the generated slurm.conf.  The spool, pid and log
# locations follow notes/local-slurm.md (/var/spool, /run, /var/log/slurm).
# shellcheck shell=bash disable=SC2034  # variables for the scripts that source it
PL_SLURM_DIR=${PLATEAU_SLURM_DIR:-/var/tmp/plateau-slurm}
PL_SLURM_CONF=$PL_SLURM_DIR/slurm.conf
PL_SLURM_SPOOL=/var/spool/plateau-slurm
PL_SLURM_RUN=/run/plateau-slurm
PL_SLURM_LOGS=/var/log/slurm
PL_SLURMCTLD_PID=$PL_SLURM_RUN/slurmctld.pid
PL_SLURMD_PID=$PL_SLURM_RUN/slurmd.pid
PL_MUNGED_PID=/run/munge/munged.pid
# Present when jobs/local/up started munged (down then stops it as well).
PL_MUNGE_OURS=$PL_SLURM_DIR/munged.ours

# pl_pid_alive PIDFILE NAME: print the PID if the file names a live process
# whose command is NAME (guards against a stale file and a reused PID).
pl_pid_alive() {
  local f=$1 name=$2 pid
  [[ -r $f ]] || return 1
  pid=$(tr -dc '0-9' <"$f")
  [[ -n $pid ]] || return 1
  [[ -r /proc/$pid/comm && $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]] || return 1
  echo "$pid"
}
