#!/bin/bash
# Idle console cost: CPU and resident memory of a tessera binary over a window (default 60 s)
# in a detached 160x48 tmux session, after a 5 s warm-up.
# Usage: scripts/idle-cost.sh PATH-TO-BINARY [ARGS...]   (ARGS default: --demo)
#        IDLE_SECONDS=20 scripts/idle-cost.sh target/release/tessera --demo --demo-size 4096x8
[ $# -ge 1 ] || { echo "usage: $0 PATH-TO-BINARY [ARGS...]" >&2; exit 2; }
bin=$1
shift
[ $# -eq 0 ] && set -- --demo
secs=${IDLE_SECONDS:-60}
tmux -L idle kill-server 2>/dev/null
tmux -L idle -f /dev/null new-session -d -s i -x 160 -y 48 "exec env XDG_CONFIG_HOME=/nonexistent $(printf '%q ' "$bin" "$@")"
sleep "${IDLE_WARMUP:-5}"
pid=$(tmux -L idle display -p -t i '#{pane_pid}')
[ -d "/proc/$pid" ] || { echo "the console did not keep running" >&2; exit 1; }
tck=$(getconf CLK_TCK)
read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
t0=$(date +%s.%N)
sleep "$secs"
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
t1=$(date +%s.%N)
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
ticks=$(( (u1+s1)-(u0+s0) ))
echo "cpu_ticks=$ticks clk_tck=$tck wall=$(echo "$t1 - $t0" | bc) rss_kib=$rss peak_rss_kib=$hwm"
echo "cpu_pct_of_one_core=$(echo "scale=4; $ticks * 100 / $tck / ($t1 - $t0)" | bc -l)"
[ -n "$IDLE_KEEP" ] || tmux -L idle kill-server
