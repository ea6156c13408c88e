#!/usr/bin/env bash
# The console's CPU for one scrape target of the same bytes in different shapes: nodes x cards
# per node (64x8, 1x512, 8x64 by default). A cost that grows faster than linearly in cards per
# node shows as 1x512 costing more than 64x8.
#
#   scripts/cards-per-node.sh [SECONDS] [SHAPE...]     (needs the tessera binary, python3, tmux)
#   TESSERA: the binary (default target/release/tessera)
set -euo pipefail
secs="${1:-15}"
shift || true
shapes=("$@")
[ "${#shapes[@]}" -eq 0 ] && shapes=(64x8 1x512 8x64)
bin="$(cd "$(dirname "$0")/.." && pwd)/target/release/tessera"
bin="${TESSERA:-$bin}"
for shape in "${shapes[@]}"; do
  work="$(mktemp -d)"
  # dcgm-exporter text: eight fields a card, one Hostname a node.
  python3 - "${shape%x*}" "${shape#*x}" "$work/m.prom" <<'PY'
import sys
nodes, gpus, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
out = []
for n in range(nodes):
    host = f"gpu-node-{n:03d}"
    for g in range(gpus):
        uuid = f"GPU-{n:04x}{g:04x}-0000-0000-0000-000000000000"
        labels = f'gpu="{g}",UUID="{uuid}",device="nvidia{g}",modelName="NVIDIA A100-SXM4-80GB",Hostname="{host}"'
        for metric, value in [("DCGM_FI_DEV_GPU_UTIL", 37), ("DCGM_FI_DEV_FB_USED", 20000), ("DCGM_FI_DEV_FB_FREE", 61000),
                              ("DCGM_FI_DEV_GPU_TEMP", 55), ("DCGM_FI_DEV_POWER_USAGE", 250.5), ("DCGM_FI_DEV_SM_CLOCK", 1410),
                              ("DCGM_FI_DEV_MEM_CLOCK", 1593), ("DCGM_FI_DEV_XID_ERRORS", 0)]:
            out.append(f"{metric}{{{labels}}} {value}")
open(path, "w").write("\n".join(out) + "\n")
PY
  port=$((20000 + RANDOM % 10000))
  (cd "$work" && exec python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1) &
  server=$!
  sleep 1
  printf 'refresh = "1s"\n[sources]\nscrape_node = "label"\nscrape = ["http://127.0.0.1:%s/m.prom"]\n' "$port" >"$work/cfg.toml"
  tmux new-session -d -s "cpn-$shape" -x 160 -y 48 "$bin --read-only --config $work/cfg.toml"
  sleep 5
  pid="$(pgrep -f "^$bin --read-only --config $work/cfg.toml" | head -1)"
  t0="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
  sleep "$secs"
  t1="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
  echo "$shape ($(wc -c <"$work/m.prom") bytes): $(python3 -c "print(round(($t1 - $t0) / 100 / $secs * 100, 2))") % of a core over $secs s"
  tmux kill-session -t "cpn-$shape"
  kill "$server"
  rm -rf "$work"
done
