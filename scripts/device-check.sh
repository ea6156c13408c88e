#!/usr/bin/env bash
# The read-only device check: tessera against the NVIDIA driver and GPUs of this machine, in at
# most five minutes, everything written under one folder.
#
# It never changes a GPU's settings: nvidia-smi is run only in its query forms (-q -x,
# --version, dmon), tessera only on its read paths (snapshot, device-check, the console with
# --read-only). No MIG mode or layout, compute mode, clock, power limit, persistence or reset.
#
#   scripts/device-check.sh [OUT_DIR]        (default: device-check-YYYYMMDDTHHMMSSZ)
#
# Needs the tessera binary and what an NVIDIA driver install ships (nvidia-smi,
# libnvidia-ml.so.1). Optional: tmux (the console's 30 s at 160x48) and nvitop (beside it).
# Settings, from the environment:
#   TESSERA          the binary (default: target/release/tessera here, else tessera on PATH)
#   NVML_LIB         the NVML library (default: the driver's libnvidia-ml.so.1)
#   NVIDIA_SMI       nvidia-smi (default: on PATH)
#   CONSOLE_SECONDS  how long the console runs (default 30)
# Exit: 0 when every field agrees within its tolerance (docs/sources.md, "The device check");
# 1 when a field differs or a required step failed; 2 on bad usage. CI runs the same script on
# the fake library and a fake nvidia-smi built from the same scenario (tests/device_check.rs).
set -uo pipefail
started="$(date +%s)"
# Every step gets what is left of five minutes, less what the console and the end need.
deadline=$((started + 300))

# Paths the caller gave are the caller's: made absolute before moving to the repository.
absolute() { case "$1" in /*) echo "$1" ;; */*) echo "$PWD/$1" ;; *) echo "$1" ;; esac; }
out="$(absolute "${1:-device-check-$(date -u +%Y%m%dT%H%M%SZ)}")"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
smi="$(absolute "${NVIDIA_SMI:-nvidia-smi}")"
[ -n "${NVML_LIB:-}" ] && NVML_LIB="$(absolute "$NVML_LIB")"
tessera=""
[ -n "${TESSERA:-}" ] && tessera="$(absolute "$TESSERA")"
cd "$(dirname "$0")/.." || exit 2

secs="${CONSOLE_SECONDS:-30}"
if [ -z "$tessera" ] && [ -x target/release/tessera ]; then
  tessera="$PWD/target/release/tessera"
elif [ -z "$tessera" ]; then
  tessera="$(command -v tessera || true)"
fi
if [ -z "$tessera" ] || ! [ -x "$tessera" ]; then
  echo "device-check: no tessera binary (set TESSERA, or cargo build --release)" >&2
  exit 2
fi
case "$secs" in
  '' | *[!0-9]*) echo "device-check: CONSOLE_SECONDS must be a whole number of seconds" >&2; exit 2 ;;
esac
if [ "$secs" -gt 60 ]; then
  echo "device-check: CONSOLE_SECONDS is at most 60 (the whole check fits in five minutes)" >&2
  exit 2
fi
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "device-check: $out exists and is not empty; give a new folder" >&2
  exit 2
fi
mkdir -p "$out" || exit 2
out="$(cd "$out" && pwd)"
nvml_flag="--nvml"
[ -n "${NVML_LIB:-}" ] && nvml_flag="--nvml=$NVML_LIB"
# tessera reads nothing of the user's config: NVML alone.
: >"$out/empty-config.toml"
run=("$tessera" --config "$out/empty-config.toml" "$nvml_flag")

failed=0
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Seconds a step may take: its own limit, or what is left before the deadline once the console
# (twice CONSOLE_SECONDS, tessera and nvitop) and the end (10 s) are set aside.
budget() {
  local left=$((deadline - $(date +%s) - 2 * secs - 10))
  [ "$left" -lt 1 ] && left=1
  [ "$1" -lt "$left" ] && left="$1"
  echo "$left"
}

# step NAME REQUIRED(1|0) TIMEOUT_S OUTFILE -- COMMAND...: runs it, records rc and time.
step() {
  local name="$1" required="$2" limit="$3" file="$4"
  shift 5
  local t0 rc
  t0="$(now_ms)"
  # -k: a program that ignores SIGTERM (a hung driver call) is killed 5 s later.
  timeout -k 5 "$(budget "$limit")" "$@" >"$out/$file" 2>"$out/$file.stderr"
  rc=$?
  local took=$(( $(now_ms) - t0 ))
  [ -s "$out/$file.stderr" ] || rm -f "$out/$file.stderr"
  if [ "$rc" -eq 0 ]; then
    note "ok      $name (${took} ms) -> $file"
  elif [ "$required" = 1 ]; then
    note "FAILED  $name: exit $rc after ${took} ms (see $file.stderr)"
    failed=1
  else
    note "note    $name: exit $rc after ${took} ms (see $file.stderr)"
  fi
  return "$rc"
}

note "tessera device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(timeout -k 2 10 "$tessera" --version 2>/dev/null)"
note "read-only: no GPU setting is changed by any step"

# 1. What the driver says of itself and of every card.
step "nvidia-smi --version" 1 30 nvidia-smi-version.txt -- "$smi" --version
step "nvidia-smi -q -x (before tessera)" 1 40 nvidia-smi-q.xml -- "$smi" -q -x

# 2. tessera's first answer (the table and the JSON, each from a fresh start), then NVML's
#    answers and timings over ten refreshes.
snapshot_ok=0
step "tessera snapshot --json (first answer)" 1 40 snapshot.json -- "${run[@]}" snapshot --json && snapshot_ok=1
# A second read of nvidia-smi right after: readings that move are compared against both.
step "nvidia-smi -q -x (after tessera)" 0 40 nvidia-smi-q-after.xml -- "$smi" -q -x
step "tessera snapshot (table)" 0 40 snapshot.txt -- "${run[@]}" snapshot
step "tessera device-check probe (10 refreshes)" 1 60 probe.json -- "${run[@]}" device-check probe --refreshes 10

# 3. Card by card against nvidia-smi.
if [ "$snapshot_ok" = 1 ] && [ -s "$out/nvidia-smi-q.xml" ]; then
  reads=("$out/nvidia-smi-q.xml")
  [ -s "$out/nvidia-smi-q-after.xml" ] && reads+=("$out/nvidia-smi-q-after.xml")
  timeout -k 2 20 "$tessera" device-check compare "$out/snapshot.json" "${reads[@]}" --json >"$out/compare.json" 2>/dev/null
  step "compare with nvidia-smi" 1 20 compare.txt -- "$tessera" device-check compare "$out/snapshot.json" "${reads[@]}"
  grep -E "agree, .* beyond tolerance" "$out/compare.txt" | sed 's/^/        /' | tee -a "$summary"
else
  note "FAILED  compare with nvidia-smi: a side gave no answer"
  failed=1
fi

# 4. A scenario for the fake library, from what tessera read (UUIDs replaced).
if [ "$snapshot_ok" = 1 ]; then
  if [ -s "$out/probe.json" ]; then
    step "scenario for the fake NVML" 0 20 scenario.json -- "$tessera" device-check scenario "$out/snapshot.json" --probe "$out/probe.json"
  else
    step "scenario for the fake NVML" 0 20 scenario.json -- "$tessera" device-check scenario "$out/snapshot.json"
  fi
  # The calls NVML did not answer, in a line each (the details are in probe.json).
  if [ -s "$out/probe.json" ]; then
    n="$(awk '/"failing_calls"/ { on = 1 } on && /"call":/ { n++ } END { print n + 0 }' "$out/probe.json")"
    note "        $n NVML call(s) did not always answer (probe.json, failing_calls)"
  fi
fi

# 5. The console for CONSOLE_SECONDS at 160x48: its screen, CPU and peak memory, beside
#    nvidia-smi dmon (and nvitop where installed) over the same seconds.
# CPU time in nanoseconds: the scheduler's count summed over the process's threads where the
# kernel keeps it (a clock tick is 10 ms, too coarse for a quiet console), else clock ticks.
ticks="$(getconf CLK_TCK 2>/dev/null || echo 100)"
clock="schedstat"
[ -r "/proc/$$/schedstat" ] || clock="clock ticks"
cpu_ns() {
  if [ "$clock" = schedstat ]; then
    cat "/proc/$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'
  else
    awk -v t="$ticks" '{ printf "%.0f\n", ($14 + $15) * 1e9 / t }' "/proc/$1/stat" 2>/dev/null || echo 0
  fi
}
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# measure NAME WINDOW COMMAND: run COMMAND in a 160x48 tmux window for $secs seconds, then
# capture the screen and the process's CPU share and peak resident memory.
measure() {
  local name="$1" window="$2" cmd="$3" pid c0 c1 peak
  if ! tmux -L "$sock" new-window -d -t devcheck -n "$window" "exec $cmd"; then
    note "FAILED  $name in tmux: the window could not be opened"
    [ "$name" = tessera ] && failed=1
    return 1
  fi
  sleep 0.5
  pid="$(tmux -L "$sock" display-message -p -t "devcheck:$window" '#{pane_pid}')"
  c0="$(cpu_ns "$pid")"
  sleep "$secs"
  c1="$(cpu_ns "$pid")"
  peak="$(hwm_kib "$pid")"
  tmux -L "$sock" capture-pane -p -t "devcheck:$window" >"$out/$window-160x48.txt"
  if [ -z "$pid" ] || ! [ -e "/proc/$pid" ]; then
    note "FAILED  $name in tmux: the process ended early (see $window-160x48.txt)"
    [ "$name" = tessera ] && failed=1
    return 1
  fi
  awk -v n="$name" -v c="$((c1 - c0))" -v s="$secs" -v k="$peak" -v how="$clock" \
    'BEGIN { printf "%s: %.3f %% of a core over %d s (%s), peak resident %.1f MiB\n", n, 100 * c / 1e9 / s, s, how, k / 1024 }' \
    | tee -a "$out/console-usage.txt" | sed 's/^/        /' | tee -a "$summary"
  note "ok      $name in tmux for ${secs} s -> $window-160x48.txt"
}

if [ "$secs" -eq 0 ]; then
  note "note    CONSOLE_SECONDS=0: the console step is skipped"
elif command -v tmux >/dev/null 2>&1; then
  sock="devcheck-$$"
  trap 'tmux -L "$sock" kill-server 2>/dev/null' EXIT
  if ! tmux -L "$sock" new-session -d -s devcheck -x 160 -y 48 -n idle "sleep $((secs * 3 + 60))"; then
    note "FAILED  the console: tmux could not start a session"
    failed=1
  else
  # A console that exits early leaves its last screen to read.
  tmux -L "$sock" set-option -g remain-on-exit on >/dev/null
  quoted="$(printf '%q ' "${run[@]}") --read-only"
  dmon_pid=""
  if timeout -k 2 10 "$smi" dmon -h >/dev/null 2>&1; then
    timeout -k 2 $((secs + 10)) "$smi" dmon -c "$secs" >"$out/dmon.txt" 2>&1 &
    dmon_pid=$!
  fi
  measure tessera console "$quoted"
  if command -v nvitop >/dev/null 2>&1; then
    measure nvitop nvitop "$(command -v nvitop)"
  else
    note "note    nvitop is not installed: the console is measured alone"
  fi
  if [ -n "$dmon_pid" ]; then
    if wait "$dmon_pid" 2>/dev/null; then
      note "ok      nvidia-smi dmon over the console's seconds -> dmon.txt"
    else
      note "note    nvidia-smi dmon ended with an error (it may refuse MIG cards): see dmon.txt"
    fi
  fi
  fi
else
  note "note    tmux is not installed: the console step is skipped"
fi

note "took $(( $(date +%s) - started )) s"
if [ "$failed" -eq 0 ]; then
  note "PASSED: every field agrees within its tolerance; results in $out"
else
  note "FAILED: see the lines above; results in $out"
fi
exit "$failed"
