#!/usr/bin/env bash
# slurm-harness.sh - a throw-away, single-host Slurm cluster with fake GPUs.
#
#   scripts/slurm-harness.sh start DIR   # start munged + slurmctld + slurmd, wait for node idle
#   scripts/slurm-harness.sh stop  DIR   # cancel jobs, stop every daemon started from DIR
#   scripts/slurm-harness.sh env   DIR   # print the env lines a test needs (SLURM_CONF=...)
#
# Everything (config, munge key + socket, state, logs, pid files, fake /dev/nvidia*
# device nodes) lives under DIR; nothing is written to /etc. Clients only need
# SLURM_CONF=DIR/etc/slurm.conf (printed by `start` and `env`).
#
# Needs root (SlurmUser=root, mknod) and the Debian packages
# slurmctld slurmd slurm-client munge (Debian 12: Slurm 22.05.8).
#
# Tunables (environment):
#   TESSERA_SLURMCTLD_PORT  slurmctld port            (default 16817)
#   TESSERA_SLURMD_PORT     slurmd port               (default 16818)
#   TESSERA_SLURM_NODE      node name                 (default `hostname -s`)
#   TESSERA_SLURM_CPUS      declared CPUs             (default 16; may exceed nproc,
#                                                      SlurmdParameters=config_overrides)
#   TESSERA_SLURM_MEM_MB    declared RealMemory (MB)  (default 65536, also fake)
#   TESSERA_SLURM_GRES      node Gres= string         (default gpu:h100:2,gpu:a100_3g.20gb:2);
#                           shard:N and mps:N items share the node's GPUs
#                           (gres.conf Name=shard|mps Count=N, split evenly)
#   TESSERA_SLURM_PREEMPT   1 = preempt/partition_prio, PreemptMode=REQUEUE
#                           (inference jobs requeue training jobs). Default 0.
#   TESSERA_SLURM_TIMEOUT   seconds to wait for the node to become idle (default 30)
set -euo pipefail

die() { echo "slurm-harness: $*" >&2; exit 1; }

usage() { die "usage: $0 {start|stop|env} DIR"; }

[[ $# -eq 2 ]] || usage
CMD=$1
[[ $CMD == start ]] && mkdir -p "$2"
[[ -d $2 ]] || die "no such directory: $2"
DIR=$(cd "$2" && pwd -P)

CTLD_PORT=${TESSERA_SLURMCTLD_PORT:-16817}
SLURMD_PORT=${TESSERA_SLURMD_PORT:-16818}
NODE=${TESSERA_SLURM_NODE:-$(hostname -s)}
CPUS=${TESSERA_SLURM_CPUS:-16}
MEM_MB=${TESSERA_SLURM_MEM_MB:-65536}
GRES=${TESSERA_SLURM_GRES:-gpu:h100:2,gpu:a100_3g.20gb:2}
PREEMPT=${TESSERA_SLURM_PREEMPT:-0}
TIMEOUT=${TESSERA_SLURM_TIMEOUT:-30}

CONF=$DIR/etc/slurm.conf
MUNGE_SOCK=$DIR/munge/munge.socket
PID_MUNGE=$DIR/run/munged.pid
PID_CTLD=$DIR/run/slurmctld.pid
PID_SLURMD=$DIR/run/slurmd.pid

print_env() {
    echo "SLURM_CONF=$CONF"
    echo "TESSERA_SLURM_NODE=$NODE"
    echo "TESSERA_SLURM_DIR=$DIR"
}

# True when the pid file names a live (non-zombie) process. A daemon killed
# hard may linger as a zombie when PID 1 does not reap promptly (containers).
pid_alive() { # pidfile
    local pid st
    [[ -s $1 ]] || return 1
    pid=$(<"$1")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# Kill the process in a pid file: TERM, wait up to ~10 s, then KILL.
stop_pidfile() { # pidfile name
    local pf=$1 name=$2 pid i
    if ! pid_alive "$pf"; then
        rm -f "$pf"
        return 0
    fi
    pid=$(<"$pf")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        pid_alive "$pf" || break
        sleep 0.1
    done
    if pid_alive "$pf"; then
        echo "slurm-harness: $name ($pid) ignored SIGTERM, sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
    rm -f "$pf"
}

# All descendants of a pid (children first-level, then theirs ...).
descendants() { # pid
    # Parent map via ps (procps).
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END {
            changed = 1; keep[root] = 1
            while (changed) {
                changed = 0
                for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 }
            }
            for (p in keep) if (p != root) print p
        }'
}

# slurmstepd processes (and their job processes) that belong to this DIR
# survive slurmd's death; find them by the SLURM_CONF in their environment.
stray_stepds() {
    local p
    for p in $(pgrep -x slurmstepd || true); do
        if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$CONF"; then
            echo "$p"
        fi
    done
}

write_config() {
    local ctld_state=$DIR/state/slurmctld slurmd_spool=$DIR/state/slurmd
    mkdir -p "$DIR/etc" "$DIR/munge" "$DIR/run" "$DIR/log" "$DIR/dev" "$ctld_state" "$slurmd_spool" "$DIR/jobs"
    chmod 0755 "$DIR/munge" "$DIR/etc" "$DIR/run" "$DIR/log" "$DIR/dev"

    # Fake GPUs: character devices with the NVIDIA major number (195).
    # gres.conf lines are generated from the Gres= string: each "gpu:TYPE:N"
    # gets the next N /dev/nvidiaK minors.
    local gres_conf="" minor=0 item name type count first last k
    IFS=',' read -r -a items <<<"$GRES"
    local gres_types=gpu
    for item in "${items[@]}"; do
        IFS=':' read -r name type count <<<"$item"
        if [[ ($name == shard || $name == mps) && $type =~ ^[0-9]+$ && -z $count ]]; then
            gres_conf+="NodeName=$NODE Name=$name Count=$type"$'\n'
            gres_types+=",$name"
            continue
        fi
        [[ $name == gpu && -n $type && $count =~ ^[0-9]+$ ]] \
            || die "TESSERA_SLURM_GRES items must look like gpu:TYPE:COUNT, shard:COUNT or mps:COUNT, got '$item'"
        first=$minor
        last=$((minor + count - 1))
        for ((k = first; k <= last; k++)); do
            if [[ ! -e $DIR/dev/nvidia$k ]]; then
                mknod -m 0666 "$DIR/dev/nvidia$k" c 195 "$k" 2>/dev/null \
                    || touch "$DIR/dev/nvidia$k" # mknod not permitted (untested fallback)
            fi
        done
        if ((count == 1)); then
            gres_conf+="NodeName=$NODE Name=gpu Type=$type File=$DIR/dev/nvidia$first"$'\n'
        else
            gres_conf+="NodeName=$NODE Name=gpu Type=$type File=$DIR/dev/nvidia[$first-$last]"$'\n'
        fi
        minor=$((last + 1))
    done

    local preempt_lines="PreemptType=preempt/none"
    if [[ $PREEMPT == 1 ]]; then
        preempt_lines=$'PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE'
    fi

    cat >"$CONF" <<EOF
# Generated by scripts/slurm-harness.sh - single-host test cluster.
ClusterName=tessera
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root

AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK

StateSaveLocation=$ctld_state
SlurmdSpoolDir=$slurmd_spool
SlurmctldPidFile=$PID_CTLD
SlurmdPidFile=$PID_SLURMD
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/etc/plugstack.conf

# No cgroups: containers rarely have cgroup delegation.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# NOTE: AccountingStorageTRES=gres/gpu,... (GPUs in CfgTRES/AllocTRES) is fatal
# without slurmdbd in 22.05 ("slurmdbd is required to run with TRES gres/gpu").
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
LaunchParameters=use_interactive_step

SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
GresTypes=$gres_types
# Declared CPUs/memory may exceed the real machine (test only).
SlurmdParameters=config_overrides

SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
PriorityType=priority/multifactor
# PriorityWeightAge/Fairshare need slurmdbd; partition factor works without it.
PriorityWeightPartition=1000
$preempt_lines

ReturnToService=2
JobRequeue=1
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
MailProg=/bin/true

NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=$GRES State=UNKNOWN
PartitionName=inference Nodes=$NODE PriorityTier=10 PriorityJobFactor=10 MaxTime=INFINITE State=UP
PartitionName=training  Nodes=$NODE PriorityTier=1 Default=YES MaxTime=INFINITE State=UP
EOF

    printf '# Generated by scripts/slurm-harness.sh\nAutoDetect=off\n%s' "$gres_conf" >"$DIR/etc/gres.conf"
    : >"$DIR/etc/plugstack.conf"
    # Only consulted by cgroup plugins, none are configured; present so nothing
    # falls back to /etc/slurm/cgroup.conf.
    printf '# Generated by scripts/slurm-harness.sh (no cgroup plugins in use)\nCgroupAutomount=no\n' >"$DIR/etc/cgroup.conf"
}

start_munge() {
    local key=$DIR/munge/munge.key
    if [[ ! -s $key ]]; then
        (umask 077 && head -c 1024 /dev/urandom >"$key")
    fi
    chmod 0400 "$key"
    rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
    munged --socket="$MUNGE_SOCK" --key-file="$key" --pid-file="$PID_MUNGE" \
        --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" \
        || start_failed "munged failed to start"
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -S $MUNGE_SOCK ]] && pid_alive "$PID_MUNGE" && return 0
        sleep 0.1
    done
    start_failed "munged socket $MUNGE_SOCK did not appear"
}

# A daemon forks and writes its pid file a moment later: it is gone when the
# pid file names a dead process, or when no pid file appeared within 5 s.
daemon_gone() { # pidfile started_at(SECONDS)
    if [[ -s $1 ]]; then
        if pid_alive "$1"; then return 1; fi
        return 0
    fi
    ((SECONDS - $2 >= 5))
}

start_failed() { # message
    echo "slurm-harness: $1" >&2
    local f
    for f in "$DIR/log/munged.log" "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log"; do
        [[ -f $f ]] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }
    done
    cmd_stop >/dev/null 2>&1 || true
    exit 1
}

cmd_start() {
    local t0 state i
    local b
    for b in munged slurmctld slurmd sinfo squeue scancel; do
        command -v "$b" >/dev/null || die "$b not found: apt-get install slurmctld slurmd slurm-client munge"
    done
    [[ $(id -u) -eq 0 ]] || die "must run as root (SlurmUser=root)"
    for pf in "$PID_MUNGE" "$PID_CTLD" "$PID_SLURMD"; do
        pid_alive "$pf" && die "already running from $DIR (pid file $pf); run '$0 stop $DIR' first"
    done

    t0=$(date +%s%N)
    write_config
    export SLURM_CONF=$CONF
    start_munge

    # -c: start from clean state (no jobs recovered from a previous run in DIR).
    slurmctld -c -f "$CONF" || start_failed "slurmctld failed to start"
    slurmd -N "$NODE" -f "$CONF" || start_failed "slurmd failed to start"

    state=""
    local started=$SECONDS deadline=$((SECONDS + TIMEOUT)) why=""
    while :; do
        if daemon_gone "$PID_CTLD" "$started"; then why="slurmctld exited"; break; fi
        if daemon_gone "$PID_SLURMD" "$started"; then why="slurmd exited"; break; fi
        state=$(timeout 5 sinfo -h -n "$NODE" -o '%T' 2>/dev/null | head -n1 || true)
        [[ $state == idle ]] && break
        if ((SECONDS >= deadline)); then why="timed out after ${TIMEOUT}s"; break; fi
        sleep 0.2
    done
    [[ $state == idle ]] || start_failed "node $NODE not idle: $why (state '${state}')"
    echo "slurm-harness: node $NODE idle after $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
    print_env
}

cmd_stop() {
    export SLURM_CONF=$CONF
    local i p c
    # Cancel jobs first so slurmstepd/job processes exit through Slurm.
    if pid_alive "$PID_CTLD" && [[ -f $CONF ]]; then
        local ids
        ids=$(timeout 5 squeue -h -o %i 2>/dev/null || true)
        if [[ -n $ids ]]; then
            # shellcheck disable=SC2086
            timeout 5 scancel --quiet $ids 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                [[ -z $(timeout 5 squeue -h -t RUNNING,COMPLETING,CONFIGURING -o %i 2>/dev/null) ]] && break
                sleep 0.2
            done
        fi
    fi
    stop_pidfile "$PID_SLURMD" slurmd
    stop_pidfile "$PID_CTLD" slurmctld
    # Anything left behind by slurmd (stepds of jobs still running).
    for p in $(stray_stepds); do
        for c in $(descendants "$p"); do kill -KILL "$c" 2>/dev/null || true; done
        kill -KILL "$p" 2>/dev/null || true
    done
    stop_pidfile "$PID_MUNGE" munged
    rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
    echo "slurm-harness: stopped ($DIR)" >&2
}

case $CMD in
start) cmd_start ;;
stop) cmd_stop ;;
env) print_env ;;
*) usage ;;
esac
