#!/usr/bin/env bash
# simulate-bench: the speed of `tessera simulate` (docs/benchmarks.md, "What-if engine").
#
# Usage: scripts/simulate-bench.sh TRACE_DIR
#   TRACE_DIR holds openb_pod_list_default.csv and openb_node_list_gpu_node.csv, the Alibaba
#   GPU cluster trace v2023 (github.com/alibaba/clusterdata, cluster-trace-gpu-v2023; the
#   repository keeps only a sample, tests/fixtures/traces/).
#   TESSERA=path/to/tessera (default target/release/tessera; build it with
#   `cargo build --release`).
#
# Runs, each timed (wall seconds and peak resident memory where GNU time is installed):
#   1. the trace replayed under all five policies;
#   2. packing to 130 % under the paper's protocol (10 runs) with the five placements;
#   3. the capacity search for one policy (exclusive, p90 wait of 10 minutes);
#   4. a synthetic 1,000,000-job demand on 32,768 GPUs under exclusive.
set -euo pipefail
dir=${1:?usage: scripts/simulate-bench.sh TRACE_DIR}
bin=${TESSERA:-target/release/tessera}
pods=$dir/openb_pod_list_default.csv
nodes=$dir/openb_node_list_gpu_node.csv
[ -x "$bin" ] || { echo "no $bin: cargo build --release" >&2; exit 2; }
[ -r "$pods" ] && [ -r "$nodes" ] || { echo "no trace in $dir" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {
	local name=$1
	shift
	local start end
	start=$(date +%s.%N)
	if command -v /usr/bin/time >/dev/null && /usr/bin/time -f %M true 2>/dev/null; then
		/usr/bin/time -f "%M" -o "$tmp/rss" "$bin" "$@" >"$tmp/out"
	else
		"$bin" "$@" >"$tmp/out"
		echo "?" >"$tmp/rss"
	fi
	end=$(date +%s.%N)
	printf '%-44s %7.2f s  %8s KiB peak\n' "$name" "$(echo "$end - $start" | bc)" "$(cat "$tmp/rss")"
	cat "$tmp/out" | sed 's/^/    /'
}

echo "machine: $(nproc) cores, $(uname -m); $(date -u +%Y-%m-%dT%H:%MZ)"
run "trace replay, five policies" simulate --trace "$pods" --nodes "$nodes"
run "trace packing to 130%, 10 runs, five placements" simulate --trace "$pods" --nodes "$nodes" --pack 130%
run "trace capacity search, exclusive, p90 10m" simulate --trace "$pods" --nodes "$nodes" --policy exclusive --target-p90-wait 10m
# 1,000,000 jobs, one every 2 s, 1-8 whole cards (mean 2.8), 20,000 s on average: about 86 %
# of 32,768 GPUs asked for at once.
awk 'BEGIN {
	srand(1); print "name,submit,duration,gpus,class";
	split("1 1 1 2 4 8", g, " ");
	for (i = 0; i < 1000000; i++) {
		printf "j%d,%d,%d,%d,%s\n", i, i * 2, 1 + int(-20000 * log(1 - rand())), g[1 + int(rand() * 6)], (i % 3 ? "training" : "inference")
	}
}' >"$tmp/synthetic.csv"
run "synthetic 1,000,000 jobs on 32,768 GPUs, exclusive" simulate --demand "$tmp/synthetic.csv" --fleet 32768xA100-80GB --policy exclusive
