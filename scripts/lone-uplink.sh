#!/usr/bin/env bash
# The default over a single cellular modem against plain TCP over the same modem through braid's
# tunnel (`recovery = "none"`), in the simulator: every Mahimahi drive in $BRAID_TRACES (each
# NAME.down with its NAME.up), with a 100 kB and a 400 kB modem buffer and 20 and 40 ms one way,
# one bulk download of DURATION seconds. A lone uplink is where the default can only lose: there
# is no capacity to add, and whatever it spends on repair or probing is taken from the passengers.
#   BRAID_TRACES=DIR scripts/lone-uplink.sh
#   DURATION=300, SEED=1, BIN=target/release/braid, OUT=target/lone-uplink (scenario files, JSON)
#   SHIFTS="-3 -1 1 3 5": also each one-way delay shifted by these ms (a trace has no randomness, so
#     seeds give one run; small shifts sample how much a case depends on where timers fall)
set -euo pipefail
: "${BRAID_TRACES:?set BRAID_TRACES to the folder of Mahimahi traces (NAME.down and NAME.up)}"
# Absolute, since the scenario files written below name the traces from another folder.
BRAID_TRACES=$(realpath "$BRAID_TRACES")
case $BRAID_TRACES in *'"'*) echo "lone-uplink: a trace folder whose path has a double quote cannot go in a scenario file" >&2; exit 1 ;; esac
cd "$(dirname "$0")/.."
duration=${DURATION:-300}
seed=${SEED:-1}
bin=${BIN:-target/release/braid}
out=${OUT:-target/lone-uplink}
mkdir -p "$out"
[ -n "${BIN:-}" ] || cargo build --release --quiet -p braid
echo "braid $("$bin" --version | awk '{print $2}'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), seed $seed, ${duration} s per run"
printf '%-24s %7s %9s %16s %16s %7s %19s\n' trace "buffer" "one way" "plain TCP" "default" ratio "default's overhead"
found=0
for down in "$BRAID_TRACES"/*.down; do
  [ -e "$down" ] || continue
  name=$(basename "$down" .down)
  [ -e "$BRAID_TRACES/$name.up" ] || continue
  found=1
  for q in 100 400; do
    for d in $(for base in 20 40; do for shift in 0 ${SHIFTS:-}; do echo $((base + shift)); done; done); do
      f="$out/$name-q$q-d$d.toml"
      cat > "$f" <<TOML
name = "lone-$name-q$q-d$d"
duration_s = $duration
runs = 1
seed = $seed
[[link]]
name = "modem"
down = { trace = "$down", delay_ms = $d, queue_kb = $q }
up   = { trace = "$BRAID_TRACES/$name.up", delay_ms = $d, queue_kb = $q }
[workload]
kind = "bulk"
direction = "down"
[[scheme]]
name = "plain"
recovery = "none"
scheduler = "single"
[[scheme]]
name = "default"
TOML
      "$bin" sim "$f" --json > "${f%.toml}.json"
      python3 - "${f%.toml}.json" "$name" "$q" "$d" <<'PY'
import json, sys
r = {x["scheme"]: x for x in json.load(open(sys.argv[1]))["results"]}
p, d = r["plain"]["goodput_kbps"] / 1e3, r["default"]["goodput_kbps"] / 1e3
print(f'{sys.argv[2]:<24} {sys.argv[3] + " kB":>7} {sys.argv[4] + " ms":>9} {p:>9.3f} Mbit/s {d:>7.3f} Mbit/s {d / p if p > 0 else float("nan"):>7.3f} {r["default"]["overhead"]:>18.3f}x')
PY
    done
  done
done
[ "$found" = 1 ] || { echo "no NAME.down with NAME.up in $BRAID_TRACES" >&2; exit 1; }
