#!/usr/bin/env bash
# The performance guard: tessera's cost on a fixed set of cases, each compared with its
# recorded baseline (scripts/perf-baseline.tsv, the figures of docs/benchmarks.md), flagging
# any case more than 1.5× worse. A tool to run before resolving a change to sources, model,
# advisor or ui, not a timed test: the machines are noisy.
#
#   scripts/perf-check.sh [--quick] [--baseline FILE] [CASE...]
#
# Cases (all when none is named):
#   nvml8        8 GPUs through the fake libnvidia-ml (tests/fixtures/nvml/h100x8.json)
#   allsmi1      one all-smi-shaped endpoint on 127.0.0.1 (scripts/allsmi-serve.py), 8 GPUs
#   allsmi64     64 such endpoints, 512 GPUs
#   demo4096     the simulated cluster, --demo-size 512x8 (4,096 cards)
#   demo32768    the simulated cluster, --demo-size 4096x8 (32,768 cards)
#   advise32768  `tessera advise --demo --demo-size 4096x8`, start to exit
#   snapshot32768 `tessera snapshot --demo --demo-size 4096x8 --json`, start to exit
#
# The consoles run alone in a detached 160x48 tmux pane at a 1 s refresh. After a warm-up
# (5 s; 20 s at 32,768 cards, whose simulator takes seconds to start) the CPU time of the
# console's process tree is read over a fixed window (30 s; 10 s with --quick; twice that at
# 32,768 cards) and given as
# % of one core: CPU time, not wall time, so a busy other core does not inflate it. It is read
# from a cgroup (v2) the tree is moved into where one can be made (root), else from the clock
# ticks of /proc/PID/stat (10 ms each: coarse for the small cases). Memory: the tree's
# resident set at the window's end (steady) and the largest seen in the window (peak), MiB.
# The one-shot commands: wall seconds, CPU seconds and peak resident memory (GNU time).
#
# A case is WORSE when a figure exceeds 1.5× its baseline and also the baseline plus a small
# absolute slack (0.05 % of a core, 4 MiB, 0.3 s), so that noise on tiny figures is not
# flagged. The exit status is 1 when any case is worse, 2 when something needed is missing.
#
# Peers, optional: with nvitop on PATH it runs beside the fake NVML case, with `all-smi` on
# PATH beside the endpoint cases (not compared with a baseline; the ratio is printed).
# PEERS_DIR, where set, is a `cargo install --root` or prefix whose bin/ is searched first:
#   pip install nvitop==1.7.2
#   cargo install all-smi --version 0.28.1 --ignore-rust-version --root "$PEERS_DIR"
# (all-smi's build script needs protoc: `apt-get install protobuf-compiler` on Debian.)
#
# Needs: `cargo build --profile dist --workspace` (tessera and the fake NVML, as installed:
# whole-program LTO; PERF_PROFILE=release measures `--release` builds), tmux, bc, python3,
# curl, GNU time (/usr/bin/time). Environment: TESSERA (the binary), PERF_PROFILE, PERF_WINDOW,
# PERF_WARMUP (seconds), PERF_PORT (the endpoints' first port, default 19101).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=""
baseline="scripts/perf-baseline.tsv"
cases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --baseline) baseline=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) cases+=("$1") ;;
  esac
  shift
done
all=(nvml8 allsmi1 allsmi64 demo4096 demo32768 advise32768 snapshot32768)
[ ${#cases[@]} -eq 0 ] && cases=("${all[@]}")
for c in "${cases[@]}"; do
  case " ${all[*]} " in *" $c "*) ;; *) echo "unknown case $c (cases: ${all[*]})" >&2; exit 2 ;; esac
done

[ -n "${PEERS_DIR:-}" ] && PATH="$PEERS_DIR/bin:$PATH"
window=${PERF_WINDOW:-$([ -n "$quick" ] && echo 10 || echo 30)}
warmup=${PERF_WARMUP:-5}
profile=${PERF_PROFILE:-dist}
tessera=${TESSERA:-$PWD/target/$profile/tessera}
fake="$PWD/target/$profile/libfake_nvml.so"
port=${PERF_PORT:-19101}
work=$(mktemp -d)
sock="perf-check-$$"
server_pid=""

cg=""
cg_root=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts 2>/dev/null || true)
if [ -n "$cg_root" ] && mkdir "$cg_root/perf-check-$$" 2>/dev/null; then
  rmdir "$cg_root/perf-check-$$"
  cg="$cg_root/perf-check-$$"
fi

cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  local d
  for d in "${cg:-/nonexistent}"-*; do
    [ -d "$d" ] || continue
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      rmdir "$d" 2>/dev/null && break
      sleep 0.3
    done
  done
  rm -rf "$work"
}
trap cleanup EXIT

for f in "$tessera" "$fake"; do
  [ -e "$f" ] || { echo "missing $f: run cargo build --profile $profile --workspace" >&2; exit 2; }
done
for t in tmux bc python3 curl /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "perf-check needs $t" >&2; exit 2; }
done
mkdir -p "$work/lib"
ln -s "$fake" "$work/lib/libnvidia-ml.so.1"
ln -s "$fake" "$work/lib/libnvidia-ml.so"
tck=$(getconf CLK_TCK)

tree() { # the process and its descendants
  echo "$1"
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do tree "$c"; done
}
ticks() {
  local t=0 p
  for p in $(tree "$1"); do
    [ -r "/proc/$p/stat" ] || continue
    t=$((t + $(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13 + $14 + $15 + 0}')))
  done
  echo "$t"
}
rss_kib() {
  local r=0 p
  for p in $(tree "$1"); do
    [ -r "/proc/$p/status" ] || continue
    r=$((r + $(awk '/^VmRSS/ {v = $2} END {print v + 0}' "/proc/$p/status" 2>/dev/null)))
  done
  echo "$r"
}

# console NAME [VAR=VALUE...] COMMAND...: "cpu_pct steady_mib peak_mib" over the window, or
# "failed".
console() {
  local name=$1 warm=$warmup secs=$window
  shift
  # 32,768 cards: a longer start, and a window twice as long (the simulator steps every 5 s,
  # the advisor and the projection run on their own paces: 30 s windows read 4-6 %).
  case "$name" in *32768*) warm=${PERF_WARMUP:-20}; secs=$((window * 2)) ;; esac
  tmux -L "$sock" kill-server 2>/dev/null || true
  sleep 0.5
  tmux -L "$sock" -f /dev/null new-session -d -s m -x 160 -y 48 "exec env $(printf '%q ' "$@") 2>$work/$name.stderr"
  sleep "$warm"
  local pid
  pid=$(tmux -L "$sock" display -p -t m '#{pane_pid}' 2>/dev/null) || { echo failed; return; }
  [ -d "/proc/$pid" ] || { echo failed; return; }
  local c="" u0="" u1 t0 t1 w0 w1 peak=0 r p
  if [ -n "$cg" ] && mkdir "$cg-$name" 2>/dev/null; then
    c="$cg-$name"
    for p in $(tree "$pid"); do echo "$p" >"$c/cgroup.procs" 2>/dev/null || c=""; done
  fi
  [ -n "$c" ] && u0=$(awk '$1 == "usage_usec" {print $2}' "$c/cpu.stat")
  t0=$(ticks "$pid"); w0=$(date +%s.%N)
  for _ in $(seq "$secs"); do
    sleep 1
    r=$(rss_kib "$pid")
    [ "$r" -gt "$peak" ] && peak=$r
  done
  [ -n "$c" ] && u1=$(awk '$1 == "usage_usec" {print $2}' "$c/cpu.stat")
  t1=$(ticks "$pid"); w1=$(date +%s.%N)
  [ -d "/proc/$pid" ] || { echo failed; return; }
  tmux -L "$sock" kill-server 2>/dev/null || true
  local cpu
  if [ -n "$u0" ]; then
    cpu=$(echo "($u1 - $u0) * 100 / 1000000 / ($w1 - $w0)" | bc -l)
  else
    cpu=$(echo "($t1 - $t0) * 100 / $tck / ($w1 - $w0)" | bc -l)
  fi
  printf '%.3f %.1f %.1f\n' "$cpu" "$(echo "$r / 1024" | bc -l)" "$(echo "$peak / 1024" | bc -l)"
}

# oneshot NAME COMMAND...: "wall_s cpu_s peak_mib", or "failed".
oneshot() {
  local name=$1
  shift
  if ! env XDG_CONFIG_HOME=/nonexistent /usr/bin/time -f '%e %U %S %M' -o "$work/$name.time" "$@" \
      >"$work/$name.out" 2>"$work/$name.stderr"; then
    echo failed
    return
  fi
  awk '{printf "%.2f %.2f %.1f\n", $1, $2 + $3, $4 / 1024}' "$work/$name.time"
}

serve() { # serve COUNT: all-smi-shaped endpoints from $port; their hosts file is $work/hosts
  [ -n "$server_pid" ] && { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; }
  rm -f "$work/hosts"
  python3 scripts/allsmi-serve.py "$port" "$1" "$work/hosts" >"$work/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do [ -s "$work/hosts" ] && break; sleep 0.1; done
  [ -s "$work/hosts" ] || { echo "the endpoints did not start: $(cat "$work/serve.log")" >&2; exit 2; }
  {
    echo '[sources]'
    echo 'scrape_node = "label"'
    printf 'scrape = ['
    sed 's|^|"http://|; s|$|/metrics",|' "$work/hosts" | tr -d '\n' | sed 's/,$//'
    echo ']'
  } >"$work/scrape.toml"
}

# The baseline's figures for a case: "cpu steady peak" (consoles) or "wall cpu peak".
base() { [ -r "$baseline" ] && awk -F'\t' -v c="$1" '$1 == c {print $2, $3, $4}' "$baseline" || true; }

worse=0
report=()
judge() { # judge CASE KIND RESULT: one line of the report
  local name=$1 kind=$2 got=$3 b verdict="ok" notes=""
  if [ "$got" = failed ]; then
    report+=("$(printf '%-14s %-44s %s' "$name" "did not run (see its stderr)" "WORSE")")
    worse=1
    return
  fi
  b=$(base "$name")
  set -- $got
  local g1=$1 g2=$2 g3=$3 labels slack
  if [ "$kind" = console ]; then labels="cpu_pct steady_mib peak_mib"; slack="0.05 4 4"; else labels="wall_s cpu_s peak_mib"; slack="0.3 0.3 4"; fi
  if [ -z "$b" ]; then
    verdict="no baseline"
  else
    set -- $b
    local bs=("$1" "$2" "$3") gs=("$g1" "$g2" "$g3") ls=($labels) ss=($slack) i
    for i in 0 1 2; do
      if [ "$(echo "${gs[$i]} > 1.5 * ${bs[$i]} && ${gs[$i]} > ${bs[$i]} + ${ss[$i]}" | bc -l)" = 1 ]; then
        verdict="WORSE"
        notes+=" ${ls[$i]} ${gs[$i]} > 1.5x ${bs[$i]};"
        worse=1
      fi
    done
  fi
  local shown
  if [ "$kind" = console ]; then
    shown=$(printf '%7s %% core %7s MiB steady %7s MiB peak' "$g1" "$g2" "$g3")
  else
    shown=$(printf '%6s s wall %6s s CPU %7s MiB peak' "$g1" "$g2" "$g3")
  fi
  report+=("$(printf '%-14s %-44s base %-22s %s%s' "$name" "$shown" "${b:-—}" "$verdict" "$notes")")
}

peer() { # peer LABEL CASE RESULT TESSERA-RESULT
  local label=$1 name=$2 got=$3 ours=$4
  if [ "$got" = failed ] || [ "$ours" = failed ]; then
    report+=("$(printf '  peer %-20s %s' "$label" "did not run")")
    return
  fi
  set -- $got $ours
  local ratio=—
  [ "$(echo "$4 > 0" | bc -l)" = 1 ] && ratio=$(printf '%.2f' "$(echo "$4 / $1" | bc -l)")
  report+=("$(printf '  peer %-20s %7s %% core %7s MiB steady %7s MiB peak; tessera/peer CPU %s, RSS %.2f' \
    "$label" "$1" "$2" "$3" "$ratio" "$(echo "$5 / $2" | bc -l)")")
}

have() { command -v "$1" >/dev/null 2>&1; }

echo "perf-check: $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), ${window}s windows, CPU by $([ -n "$cg" ] && echo cgroup || echo ticks), baseline $baseline" >&2
for name in "${cases[@]}"; do
  echo "  $name ..." >&2
  case "$name" in
    nvml8)
      scen="$PWD/tests/fixtures/nvml/h100x8.json"
      r=$(console "$name" FAKE_NVML_SCENARIO="$scen" XDG_CONFIG_HOME=/nonexistent "$tessera" --nvml="$work/lib/libnvidia-ml.so.1" --refresh 1s)
      judge "$name" console "$r"
      if have nvitop; then
        p=$(console "$name-nvitop" FAKE_NVML_SCENARIO="$scen" LD_LIBRARY_PATH="$work/lib" nvitop --interval 1)
        peer "nvitop" "$name" "$p" "$r"
      fi ;;
    allsmi1|allsmi64)
      serve "${name#allsmi}"
      r=$(console "$name" XDG_CONFIG_HOME=/nonexistent "$tessera" --config "$work/scrape.toml" --refresh 1s)
      judge "$name" console "$r"
      if have all-smi; then
        p=$(console "$name-allsmi" SUPPRESS_LOCALHOST_WARNING=1 all-smi view --hostfile "$work/hosts" --interval 1)
        peer "all-smi $(all-smi --version 2>/dev/null | awk '{print $NF}')" "$name" "$p" "$r"
      fi
      kill "$server_pid" 2>/dev/null || true
      wait "$server_pid" 2>/dev/null || true
      server_pid="" ;;
    demo4096)
      judge "$name" console "$(console "$name" XDG_CONFIG_HOME=/nonexistent "$tessera" --demo --demo-size 512x8 --refresh 1s)" ;;
    demo32768)
      judge "$name" console "$(console "$name" XDG_CONFIG_HOME=/nonexistent "$tessera" --demo --demo-size 4096x8 --refresh 1s)" ;;
    advise32768)
      judge "$name" oneshot "$(oneshot "$name" "$tessera" advise --demo --demo-size 4096x8)" ;;
    snapshot32768)
      judge "$name" oneshot "$(oneshot "$name" "$tessera" snapshot --demo --demo-size 4096x8 --json)" ;;
  esac
done

printf '%s\n' "${report[@]}"
if [ "$worse" = 1 ]; then
  echo "perf-check: WORSE than the baseline (above)"
  exit 1
fi
echo "perf-check: no case more than 1.5x worse than the baseline"
