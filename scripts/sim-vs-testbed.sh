#!/usr/bin/env bash
# Runs one scenario in the simulator and on the real-kernel testbed with the same seeds and compares
# each braid scheme's mean FCT, or for a bulk workload its goodput (and, where the scenario has them,
# the drive-by pass share and the longest stall) (issue 4: within 25 %; issue 25,
# scenarios/testbed-two-modems.toml: within 15 %). Root only (the testbed). Real time: the testbed
# takes RUNS x (duration_s + drain); the contenders of a run go side by side.
#   scripts/sim-vs-testbed.sh [SCENARIO] [RUNS] [--from-json TESTBED.json]
#   DURATION=S: run S seconds instead of the file's duration_s (a copy of the file in OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/scenario-copy.sh
scenario=${1:-scenarios/testbed-bus.toml}
runs=${2:-5}
out=${OUT:-target/sim-vs-testbed}
mkdir -p "$out"
cargo build --release --quiet
if [ -n "${DURATION:-}" ]; then
  case $DURATION in *[!0-9]* | '') echo "sim-vs-testbed: DURATION must be whole seconds, not '$DURATION'" >&2; exit 1 ;; esac
  copy="$out/$(basename "$scenario" .toml)-${DURATION}s.toml"
  grep -q '^duration_s *=' "$scenario" || { echo "sim-vs-testbed: $scenario has no duration_s line to replace" >&2; exit 1; }
  sed -E "s/^duration_s *=.*/duration_s = $DURATION/" "$scenario" > "$copy"
  link_beside "$scenario" "$out"
  scenario=$copy
fi
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
# Flow workloads are compared by mean FCT (s), bulk ones by goodput (Mbit/s).
bulk = all(r["fct_mean_s"] is None for r in tb.values())
key, ci, unit, label = (("goodput_kbps", "goodput_ci95_kbps", 1e-3, "goodput (Mbit/s)") if bulk
                        else ("fct_mean_s", "fct_ci95_s", 1.0, "mean FCT (s)"))
fmt = lambda r: f'{r[key] * unit:.3f} ± {(r[ci] or 0) * unit:.3f}'
print(f'{"scheme":8} {"sim " + label:>22} {"testbed " + label:>26} {"sim/testbed":>12}  within 25 %  within 15 %')
for name, t in tb.items():
    s = sim.get(name)
    if s is None:
        print(f'{name:8} {"(peer: testbed only)":>22} {fmt(t):>26}')
        continue
    ratio = s[key] / t[key]
    yes = lambda bound: "yes" if abs(ratio - 1) <= bound else "NO"
    print(f'{name:8} {fmt(s):>22} {fmt(t):>26} {ratio:>12.2f}  {yes(0.25):>11}  {yes(0.15):>11}')
# Drive-by passes and blackouts: the share of the pass's potential moved and the longest stall of a
# bulk flow (the largest over runs), where the scenario has them.
extra = [(k, l, f) for k, l, f in (("pass_share", "pass share", lambda x: f"{100 * x:.1f} %"),
                                    ("longest_stall_ms", "longest stall", lambda x: f"{x:.0f} ms"))
         if any(r.get(k) is not None for r in tb.values())]
if extra:
    print()
    print(f'{"scheme":12}' + "".join(f'{"sim " + l:>20} {"testbed " + l:>22} {"sim/testbed":>12}' for _, l, _ in extra))
    for name, t in tb.items():
        s = sim.get(name, {})
        cells = ""
        for k, _, f in extra:
            a, b = s.get(k), t.get(k)
            r = f"{a / b:.2f}" if a is not None and b else "-"
            cells += f'{f(a) if a is not None else "-":>20} {f(b) if b is not None else "-":>22} {r:>12}'
        print(f'{name:12}' + cells)
PY
