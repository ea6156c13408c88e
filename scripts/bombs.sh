#!/usr/bin/env bash
# The bomb campaign (issue 46): every kind of hostile input tessera reads, built by
# tests/bombs.rs and run through tessera, failing when a run's peak memory passes 256 MB.
#
# Peak memory is the process's peak RSS: VmHWM from /proc/PID/status, sampled every 2 ms while
# it runs (a run that ends within 2 ms is reported as not sampled). Not an address-space limit
# (ulimit -v): that breaks a multi-threaded Rust program on glibc's 64 MB per-thread malloc
# arenas and thread stack reservations, not on the memory it uses.
#
# Usage: scripts/bombs.sh [--quick] [--release]
#   --quick    small inputs: seconds in all (the form CI runs)
#   --release  a release build (default: the debug build `cargo test` makes)
set -euo pipefail
cd "$(dirname "$0")/.."

scale=full
profile=()
for a in "$@"; do
  case "$a" in
    --quick) scale=quick ;;
    --release) profile=(--release) ;;
    *) echo "usage: $0 [--quick] [--release]" >&2; exit 2 ;;
  esac
done

TESSERA_BOMBS="$scale" cargo test ${profile[@]+"${profile[@]}"} --test bombs -- --ignored --test-threads=1 --nocapture
