#!/usr/bin/env bash
# Runs one scenario in the simulator and on the real-kernel testbed with the same seeds and compares
# each braid scheme's mean FCT (issue 4: within 25 %). Root only (the testbed). Real time: the testbed
# takes RUNS x (duration_s + drain); the contenders of a run go side by side.
#   scripts/sim-vs-testbed.sh [SCENARIO] [RUNS] [--from-json TESTBED.json]
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-scenarios/testbed-bus.toml}
runs=${2:-5}
out=${OUT:-target/sim-vs-testbed}
mkdir -p "$out"
cargo build --release --quiet
./target/release/braid sim "$scenario" --runs "$runs" --json > "$out/sim.json"
if [ "${3:-}" = "--from-json" ]; then
  [ "$4" -ef "$out/testbed.json" ] || cp "$4" "$out/testbed.json"
else
  ./target/release/braid testbed "$scenario" --runs "$runs" --json --keep "$out/logs" > "$out/testbed.json"
fi
python3 - "$out/sim.json" "$out/testbed.json" <<'PY'
import json, sys
sim = {r["scheme"]: r for r in json.load(open(sys.argv[1]))["results"]}
tb = {r["scheme"]: r for r in json.load(open(sys.argv[2]))["results"]}
fmt = lambda r: f'{r["fct_mean_s"]:.3f} ± {r["fct_ci95_s"] or 0:.3f}'
print(f'{"scheme":8} {"sim mean FCT (s)":>18} {"testbed mean FCT (s)":>22} {"sim/testbed":>12}  within 25 %')
for name, t in tb.items():
    s = sim.get(name)
    if s is None:
        print(f'{name:8} {"(peer: testbed only)":>18} {fmt(t):>22}')
        continue
    ratio = s["fct_mean_s"] / t["fct_mean_s"]
    print(f'{name:8} {fmt(s):>18} {fmt(t):>22} {ratio:>12.2f}  {"yes" if abs(ratio - 1) <= 0.25 else "NO"}')
PY
