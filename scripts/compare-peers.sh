#!/usr/bin/env bash
# tessera beside its peers on the same work, one after another in one run, and the table.
#
# Each console runs alone in a detached 160x48 tmux pane at a 1 s refresh; after a warm-up
# the script reads the CPU time and the resident memory (MiB) of the console's process tree
# from /proc over the measuring window. The CPU time is, best first:
#   - the microseconds of a cgroup (v2, `cpu.stat` usage_usec) the console's tree is moved
#     into after its start, where a cgroup can be made (root): threads and children that come
#     and go in the window count (on a host whose services run in slices, the console leaves
#     its slice's CPU limits for the run);
#   - else the scheduler's nanoseconds summed over every thread of the tree
#     (/proc/PID/task/TID/schedstat) when the same threads run at both ends of the window,
#     marked "(schedstat)";
#   - else the clock ticks (utime + stime, and the reaped children's), marked "(ticks)": a
#     tick is 10 ms, a tenth of what tessera uses in a minute on one endpoint. all-smi's
# mock server is not counted; the fake NVML is a library inside the console's process, so its
# cost counts, for tessera and nvitop alike.
#
#   scripts/compare-peers.sh [SECONDS] [WARMUP]        (default 60 and 5)
#
# Needs: the dist build (`cargo build --profile dist --workspace`: tessera and the fake NVML,
# as installed; PERF_PROFILE=release for a `--release` build),
# tmux, bc, curl; the peers on PATH, each row skipped with the reason where one is missing:
#   nvitop 1.7.2:   pip install nvitop==1.7.2
#   all-smi 0.25.0: apt-get install protobuf-compiler libprotobuf-dev libdrm-dev cmake
#                   cargo install all-smi --version 0.25.0 --features mock   (Rust >= 1.96)
# Not run by CI: the peers take minutes to install.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
warm="${2:-5}"
profile="${PERF_PROFILE:-dist}"
tessera="$PWD/target/$profile/tessera"
fake="$PWD/target/$profile/libfake_nvml.so"
scenario="$PWD/tests/fixtures/nvml/h100x8.json"
work="$(mktemp -d)"
sock="peers-$$"
mock_pid=""

cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null || true
  rm -rf "$work"
  # Empty once the consoles are gone (tmux's kill ends them).
  local d
  for d in "${cg:-/nonexistent}"-*; do
    [ -d "$d" ] || continue
    for _ in 1 2 3 4 5; do
      rmdir "$d" 2>/dev/null && break
      # A console still leaving: end it (cgroup.kill where the kernel has it).
      echo 1 >"$d/cgroup.kill" 2>/dev/null || xargs -r kill -9 <"$d/cgroup.procs" 2>/dev/null || true
      sleep 0.2
    done
    [ -d "$d" ] && echo "compare-peers: cgroup $d left behind" >&2
  done
}
trap cleanup EXIT

for f in "$tessera" "$fake"; do
  [ -e "$f" ] || { echo "missing $f: run cargo build --profile $profile --workspace" >&2; exit 2; }
done
command -v tmux >/dev/null || { echo "tmux is needed" >&2; exit 2; }

# The fake library under the name the peers load (nvidia-ml-py and nvml-wrapper dlopen
# libnvidia-ml.so.1).
mkdir -p "$work/lib"
ln -s "$fake" "$work/lib/libnvidia-ml.so.1"
ln -s "$fake" "$work/lib/libnvidia-ml.so"

tck=$(getconf CLK_TCK)

# A cgroup v2 hierarchy to measure in, if one is mounted and writable here.
cg_root=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts 2>/dev/null || true)
cg=""
if [ -n "$cg_root" ] && mkdir "$cg_root/compare-peers-$$" 2>/dev/null; then
  rmdir "$cg_root/compare-peers-$$"
  cg="$cg_root/compare-peers-$$"
fi

# The pane's process and its descendants.
tree() {
  local p=$1
  echo "$p"
  for c in $(pgrep -P "$p" 2>/dev/null); do tree "$c"; done
}

ticks() {
  local t=0
  for p in $(tree "$1"); do
    [ -r "/proc/$p/stat" ] || continue
    # The fields after the command's closing parenthesis: utime, stime, cutime, cstime.
    t=$((t + $(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{v = $12 + $13 + $14 + $15} END {print v + 0}')))
  done
  echo "$t"
}

# Every thread of the tree, as PID/TID.
threads() {
  local p
  for p in $(tree "$1"); do
    ls "/proc/$p/task" 2>/dev/null | sed "s|^|$p/|"
  done | sort
}

# The nanoseconds every thread of the tree has run (schedstat's first field).
nanos() {
  local p
  for p in $(tree "$1"); do
    cat "/proc/$p/task/"*/schedstat 2>/dev/null
  done | awk '{t += $1} END {printf "%.0f\n", t}'
}

rss_kib() {
  local r=0
  for p in $(tree "$1"); do
    [ -r "/proc/$p/status" ] || continue
    r=$((r + $(awk '/^VmRSS/ {v = $2} END {print v + 0}' "/proc/$p/status" 2>/dev/null)))
  done
  echo "$r"
}

# measure [VAR=VALUE...] COMMAND...: prints "cpu% peak_rss_MiB" of the console over the
# window, or "failed" when it did not keep running.
measure() {
  local cmd
  cmd=$(printf '%q ' "$@")
  tmux -L "$sock" kill-server 2>/dev/null || true
  tmux -L "$sock" -f /dev/null new-session -d -s m -x 160 -y 48 "exec env $cmd 2>$work/stderr"
  sleep "$warm"
  local pid
  pid=$(tmux -L "$sock" display -p -t m '#{pane_pid}' 2>/dev/null) || { echo "failed"; return; }
  [ -d "/proc/$pid" ] || { echo "failed"; return; }
  local t0 w0 t1 w1 n0 n1 th0 th1 u0=0 u1=0 moved="" peak=0 r p c=""
  # Each console in a cgroup of its own (the last one's processes may still be leaving).
  # (measure runs in a subshell of its own: its PID names the cgroup.)
  if [ -n "$cg" ] && mkdir "$cg-$BASHPID" 2>/dev/null; then
    c="$cg-$BASHPID"
    u0=$(awk '$1 == "usage_usec" {print $2}' "$c/cpu.stat" 2>/dev/null)
    [ -n "$u0" ] && moved=yes
    for p in $(tree "$pid"); do echo "$p" >"$c/cgroup.procs" 2>/dev/null || moved=""; done
    [ -n "$moved" ] && u0=$(awk '$1 == "usage_usec" {print $2}' "$c/cpu.stat")
  fi
  th0=$(threads "$pid"); n0=$(nanos "$pid"); t0=$(ticks "$pid"); w0=$(date +%s.%N)
  for _ in $(seq "$secs"); do
    sleep 1
    r=$(rss_kib "$pid")
    [ "$r" -gt "$peak" ] && peak=$r
  done
  t1=$(ticks "$pid"); n1=$(nanos "$pid"); th1=$(threads "$pid"); w1=$(date +%s.%N)
  [ -n "$moved" ] && u1=$(awk '$1 == "usage_usec" {print $2}' "$c/cpu.stat")
  if ! [ -d "/proc/$pid" ]; then echo "failed"; return; fi
  tmux -L "$sock" kill-server 2>/dev/null || true
  local cpu how
  if [ -n "$moved" ]; then
    cpu=$(echo "scale=6; ($u1 - $u0) * 100 / 1000000 / ($w1 - $w0)" | bc -l)
    how=cgroup
  elif [ "$th0" = "$th1" ] && [ "$n1" != 0 ]; then
    cpu=$(echo "scale=6; ($n1 - $n0) * 100 / 1000000000 / ($w1 - $w0)" | bc -l)
    how=schedstat
  else
    cpu=$(echo "scale=4; ($t1 - $t0) * 100 / $tck / ($w1 - $w0)" | bc -l)
    how=ticks
  fi
  printf '%.3f %.1f %s\n' "$cpu" "$(echo "$peak / 1024" | bc -l)" "$how"
}

mock() { # mock PORTS: all-smi's mock server on 127.0.0.1, one 8-GPU node per port
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null || true
  (cd "$work" && exec all-smi-mock-server --port-range "$1" -o "$work/hosts.csv" >"$work/mock.log" 2>&1) &
  mock_pid=$!
  # Until its first and last ports answer (64 listeners take a moment).
  local last=${1#*-}
  for _ in $(seq 50); do
    curl -sf -o /dev/null "http://127.0.0.1:${1%-*}/metrics" && curl -sf -o /dev/null "http://127.0.0.1:$last/metrics" && break
    sleep 0.2
  done
}

bytes() { # bytes URL: the size of one answer
  { curl -s "$1" || true; } | wc -c
}

rows=()
row() { rows+=("$1"); }
cell() { # cell RESULT: "cpu % / MB" or the reason
  case "$1" in
    failed) echo "did not keep running" ;;
    skip:*) echo "${1#skip:}" ;;
    *) set -- $1; echo "$1 % / $2 MiB$([ "${3:-cgroup}" != cgroup ] && echo " ($3)")" ;;
  esac
}
ratio() { # ratio TESSERA PEER (each "cpu mem how"): how many times less CPU tessera used
  # (each cell says how its CPU was measured where it is not the cgroup)
  case "$1 $2" in
    *failed*|*skip:*) echo "—" ;;
    *) set -- $1 $2
       if [ "$(echo "$1 > 0" | bc -l)" = 1 ]; then
         printf '%.1f× less CPU, %.2f× the memory\n' "$(echo "$4 / $1" | bc -l)" "$(echo "$2 / $5" | bc -l)"
       else
         printf 'no CPU measured for tessera, %.2f× the memory\n' "$(echo "$2 / $5" | bc -l)"
       fi ;;
  esac
}

have() { command -v "$1" >/dev/null 2>&1; }

echo "compare-peers: ${secs}s windows after ${warm}s warm-up, 160x48, 1 s refresh; $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ); CPU by $([ -n "$cg" ] && echo "cgroup (usage_usec)" || echo "schedstat or ticks")" >&2

# 1. 8 GPUs through the fake libnvidia-ml.
echo "8 GPUs, fake NVML ..." >&2
t=$(measure FAKE_NVML_SCENARIO="$scenario" XDG_CONFIG_HOME=/nonexistent "$tessera" --nvml="$work/lib/libnvidia-ml.so.1" --refresh 1s)
if have nvitop; then
  p=$(measure FAKE_NVML_SCENARIO="$scenario" LD_LIBRARY_PATH="$work/lib" nvitop --interval 1)
else
  p="skip:nvitop not installed"
fi
row "| 8 GPUs through the fake libnvidia-ml | $(cell "$t") | nvitop 1.7.2: $(cell "$p") | $(ratio "$t" "$p") |"

# 2 and 3. all-smi's own mock endpoints, one and 64.
if have all-smi && have all-smi-mock-server; then
  for spec in "1 10001" "64 10001-10064"; do
    set -- $spec
    n=$1 ports=$2
    echo "$((n * 8)) GPUs, $n all-smi endpoint(s) ..." >&2
    mock "$ports"
    size=$(bytes http://127.0.0.1:10001/metrics)
    cfg="$work/tessera-$n.toml"
    {
      echo '[sources]'
      echo 'scrape_node = "label"'
      printf 'scrape = ['
      sed 's|^|"http://|; s|$|/metrics",|' "$work/hosts.csv" | tr -d '\n' | sed 's/,$//'
      echo ']'
    } >"$cfg"
    t=$(measure XDG_CONFIG_HOME=/nonexistent "$tessera" --config "$cfg" --refresh 1s)
    p=$(measure SUPPRESS_LOCALHOST_WARNING=1 all-smi view --hostfile "$work/hosts.csv" --interval 1)
    row "| $((n * 8)) GPUs, $n all-smi mock endpoint(s) ($((size / 1024)) KB each) | $(cell "$t") | all-smi 0.25 view: $(cell "$p") | $(ratio "$t" "$p") |"
  done
  kill "$mock_pid" 2>/dev/null || true
  mock_pid=""
else
  row "| 8 and 512 GPUs on all-smi's mock endpoints | — | all-smi not installed (cargo install all-smi --version 0.25.0 --features mock) | — |"
fi

# 4 and 5. The simulated cluster at scale (no peer simulates one).
for size in 512x8 4096x8; do
  echo "simulated $size ..." >&2
  t=$(measure XDG_CONFIG_HOME=/nonexistent "$tessera" --demo --demo-size "$size" --refresh 1s)
  n=${size%x*} g=${size#*x}
  row "| simulated $((n * g)) cards (--demo-size $size) | $(cell "$t") | — | — |"
done

echo
echo "| work | tessera | peer | ratio |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
