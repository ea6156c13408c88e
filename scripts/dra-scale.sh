#!/bin/bash
# DRA at scale (issue 49, "Speed and memory"): a generated DynamicMIG cluster (default 1,000
# nodes of 8 H100s: 208,000 devices in 9,000 slices) served by the fake API server
# (tests/dra_scale.rs), and a release tessera measured against it:
#   1. `tessera snapshot --json --kubernetes`: wall time to the first complete picture (every
#      list read, the DRA picture built, printed) and its peak RSS;
#   2. the console (`tessera --kubernetes --refresh 2s` in a detached 160x48 tmux): the time
#      until it shows the nodes, then its CPU over an idle window (IDLE_SECONDS, default 60)
#      and its RSS. Targets: <= 5 s, <= 256 MB, <= 1 % of a core.
# The cluster is generated in memory; the kubeconfig and logs go to a temporary directory
# (DRA_SCALE_KEEP=1 keeps it).
# Usage: scripts/dra-scale.sh [NODES]
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-1000}
secs=${IDLE_SECONDS:-60}
dir=$(mktemp -d "${TMPDIR:-/tmp}/tessera-dra-scale.XXXXXX")
sock=drascale$$
server=
cleanup() {
	touch "$dir/stop"
	tmux -L "$sock" kill-server 2>/dev/null || true
	[ -n "$server" ] && wait "$server" 2>/dev/null || true
	[ -n "${DRA_SCALE_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT

cargo build --release --quiet --bin tessera
cargo test --release --quiet --test dra_scale --no-run 2>/dev/null
DRA_SCALE_DIR=$dir DRA_SCALE_NODES=$nodes \
	cargo test --release --quiet --test dra_scale -- --ignored --nocapture >"$dir/server.log" 2>&1 &
server=$!
for _ in $(seq 600); do [ -f "$dir/ready" ] && break; sleep 0.5; done
[ -f "$dir/ready" ] || { echo "the server did not start:" >&2; cat "$dir/server.log" >&2; exit 1; }
echo "server: $(cat "$dir/ready")"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
export KUBECONFIG=$dir/kubeconfig
bin=target/release/tessera

# 1. The first complete picture, headless.
/usr/bin/time -f '%e %M' -o "$dir/time" "$bin" snapshot --json --kubernetes >"$dir/snapshot.json"
read -r wall kib <"$dir/time"
cards=$(jq '[.nodes[].cards | length] | add' "$dir/snapshot.json")
dra=$(jq '[.nodes[].cards[] | select(.allocation == "dra")] | length' "$dir/snapshot.json")
pending=$(jq '[.workloads[] | select(.state == "pending")] | length' "$dir/snapshot.json")
echo "snapshot: first_complete_picture_s=$wall peak_rss_mib=$((kib / 1024)) cards=$cards dra_cards=$dra pending=$pending"

# 2. The console at a 2 s refresh: time to show the nodes, then idle CPU and RSS.
t0=$(date +%s.%N)
tmux -L "$sock" -f /dev/null new-session -d -s s -x 160 -y 48 \
	"exec env XDG_CONFIG_HOME=/nonexistent KUBECONFIG=$KUBECONFIG $bin --kubernetes --refresh 2s"
shown=
for _ in $(seq 600); do
	if tmux -L "$sock" capture-pane -p -t s 2>/dev/null | grep -q 'h100-dyn-'; then
		shown=$(echo "$(date +%s.%N) - $t0" | bc)
		break
	fi
	sleep 0.05
done
echo "console: nodes_shown_s=${shown:-never}"
sleep "${IDLE_WARMUP:-10}"
pid=$(tmux -L "$sock" display -p -t s '#{pane_pid}')
[ -d "/proc/$pid" ] || { echo "the console did not keep running" >&2; exit 1; }
tck=$(getconf CLK_TCK)
read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
t1=$(date +%s.%N)
sleep "$secs"
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
t2=$(date +%s.%N)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
ticks=$(((u1 + s1) - (u0 + s0)))
pct=$(echo "scale=2; $ticks * 100 / $tck / ($t2 - $t1)" | bc -l)
echo "console: idle_cpu_pct_of_one_core=$pct over ${secs}s rss_mib=$((rss / 1024)) peak_rss_mib=$((hwm / 1024))"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
tmux -L "$sock" capture-pane -p -t s | head -3
