#!/bin/bash
# Idle console cost: CPU and resident memory of a tessera binary over 60 s on the default
# simulated cluster, in a detached 160x48 tmux session. Usage: scripts/idle-cost.sh PATH-TO-BINARY
tmux -L idle kill-server 2>/dev/null
tmux -L idle -f /dev/null new-session -d -s i -x 160 -y 48 "exec env XDG_CONFIG_HOME=/nonexistent $1 --demo"
sleep 5
pid=$(tmux -L idle display -p -t i '#{pane_pid}')
tck=$(getconf CLK_TCK)
read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
t0=$(date +%s.%N)
sleep 60
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
t1=$(date +%s.%N)
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
echo "cpu_ticks=$(( (u1+s1)-(u0+s0) )) clk_tck=$tck wall=$(echo "$t1 - $t0" | bc) rss_kib=$rss peak_rss_kib=$hwm"
echo "cpu_pct_of_one_core=$(echo "scale=4; ((u1+s1)-(u0+s0)) * 100 / $tck / ($t1 - $t0)" | bc -l)"
tmux -L idle kill-server
