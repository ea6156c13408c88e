#!/usr/bin/env bash
# The fuzz campaign under libFuzzer: every target in fuzz/fuzz_targets/ for SECONDS each
# (default 60), seeded from the real samples in tests/fixtures. Needs a nightly toolchain and
# cargo-fuzz (`cargo install cargo-fuzz`); without them it says so and exits 0 (CI runs the
# same doors through proptest in tests/inputs.rs). Prints each target's runs and findings;
# crashes are left in fuzz/artifacts/TARGET/ to turn into tests.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(exposition prometheus_api slurm kubernetes config layout recording demand)
fi
if ! cargo +nightly --version >/dev/null 2>&1 || ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz); skipped"
    exit 0
fi
seed() {
    local target=$1 dir=fuzz/corpus/$1
    mkdir -p "$dir"
    case $target in
        exposition | prometheus_api) cp tests/fixtures/dcgm/*.prom tests/fixtures/exposition/*.prom "$dir"/ ;;
        slurm) find tests/fixtures/slurm -name '*.json' -exec cp {} "$dir"/ \; ;;
        kubernetes) for f in tests/fixtures/kubernetes/*.json; do
                printf '{"nodes":[%s],"pods":[%s]}' "$(cat "$f")" "$(cat "$f")" >"$dir/$(basename "$f")"
            done ;;
        config) cp config.example.toml themes/*.toml "$dir"/ ;;
        layout) printf '3g.40gb@0,2g.20gb@4,1g.10gb@6' >"$dir/mixed"; printf 'whole' >"$dir/whole" ;;
        recording) : ;;
        demand) cp tests/fixtures/traces/*.csv "$dir"/ ;;
    esac
}
status=0
for t in "${targets[@]}"; do
    seed "$t"
    log=$(mktemp)
    if (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
        >"$log" 2>&1); then
        result=ok
    else
        result=FOUND
        status=1
    fi
    runs=$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' || grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
    echo "$t: $result, ${runs:-?} runs in ${seconds}s, coverage $cov edges$( [ $result = FOUND ] && echo ", see $log and fuzz/artifacts/$t/")"
done
exit $status
