#!/usr/bin/env bash
# The default scheme against each scenario file's named schemes and its best single uplink, in the
# simulator (issue 25): for every file, every scheme runs with the same seeds; the table gives the
# best named scheme and its value, the default's value, their ratio and the best single uplink.
# Bulk files are judged by goodput, flow files by mean FCT. The default is a [[scheme]] with only a
# `name`; a file without one gets one in a scratch copy. Each uplink alone is a scratch scheme too:
# `recovery = "none"` with `wrr` weight 1 on that uplink and 0 on the others (the passenger's TCP
# over one modem, through braid's tunnel).
#   scripts/default-vs-named.sh [FILE...]      (default: every scenarios/*.toml)
#   RUNS=3 (runs per scheme, seeds from the file's own), BIN=target/release/braid,
#   OUT=target/default-vs-named (JSON per file), JOBS (parallel runs, default all cores),
#   ONLY=REGEX (keep only the named schemes whose name matches it, to save time on long files; the
#   table then says "of those run"), REPORT_ONLY=1 (print the table from OUT's JSON of an earlier run)
# Pass: ratio >= 0.95 and the default at least as good as the best single uplink.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/scenario-copy.sh
runs=${RUNS:-3}
bin=${BIN:-target/release/braid}
out=${OUT:-target/default-vs-named}
mkdir -p "$out"
[ -n "${BIN:-}" ] || [ -n "${REPORT_ONLY:-}" ] || cargo build --release --quiet -p braid
if [ $# -eq 0 ]; then set -- scenarios/*.toml; fi
for f in "$@"; do
  [ -z "${REPORT_ONLY:-}" ] || break
  base=$(basename "$f" .toml)
  # The scratch copy finds the traces and schedules the file names beside it.
  link_beside "$f" "$out"
  python3 - "$f" "$out/$base.toml" <<'PY'
import sys, tomllib
src, dst = sys.argv[1], sys.argv[2]
import os, re
text = open(src).read()
sc = tomllib.loads(text)
only = os.environ.get("ONLY")
if only:
    # Drop the other named schemes' tables (a [[scheme]] table runs to the next table header).
    blocks = re.split(r"(?m)^(?=\[)", text)
    keep = []
    for b in blocks:
        m = re.match(r'\[\[scheme\]\]\s*\n(?:#.*\n)*name\s*=\s*"([^"]*)"', b)
        if m and not re.fullmatch(only, m.group(1)) and len(tomllib.loads(b.replace("[[scheme]]", "", 1))) > 1:
            continue
        keep.append(b)
    text = "".join(keep)
    sc = tomllib.loads(text)
links = [l["name"] for l in sc["link"]]
extra = []
if not any(set(s) == {"name"} for s in sc["scheme"]):
    extra.append('[[scheme]]\nname = "default"\n')
if len(links) > 1:
    for i, name in enumerate(links):
        w = ", ".join("1" if j == i else "0" for j in range(len(links)))
        extra.append(f'[[scheme]]\nname = "uplink:{name}"\nrecovery = "none"\nscheduler = "wrr"\nweights = [{w}]\n')
else:
    extra.append(f'[[scheme]]\nname = "uplink:{links[0]}"\nrecovery = "none"\n')
# Appended [[scheme]] tables are valid TOML after whatever table the file ends with.
open(dst, "w").write(text + "\n\n" + "\n".join(extra))
PY
  # shellcheck disable=SC2086
  "$bin" sim --json --runs "$runs" ${JOBS:+--jobs "$JOBS"} "$out/$base.toml" > "$out/$base.json"
done
python3 - "$out" "$@" <<'PY'
import json, os, sys, tomllib
out, files = sys.argv[1], sys.argv[2:]
print(f'{"file":34} {"point":>6} {"metric":11} {"best named":>16} {"value":>9} {"default":>9} {"ratio":>6} '
      f'{"best uplink":>18} {"value":>9}  pass')
misses = 0
for f in files:
    base = os.path.basename(f)[:-5]
    sc = tomllib.load(open(f"{out}/{base}.toml", "rb"))
    default = next(s["name"] for s in sc["scheme"] if set(s) == {"name"})
    peers = {s["name"] for s in sc["scheme"] if "peer" in s}
    bulk = sc["workload"]["kind"] == "bulk"
    res = json.load(open(f"{out}/{base}.json"))["results"]
    points = {}
    for r in res:
        points.setdefault(r.get("sweep_value"), {})[r["scheme"]] = r
    for point, by in points.items():
        if bulk:
            val = lambda r: r["goodput_kbps"]
            better = lambda a, b: a > b
            metric, unit = "goodput", 1e-3  # Mbit/s
        else:
            val = lambda r: r["fct_mean_s"]
            better = lambda a, b: a < b
            metric, unit = "mean FCT", 1.0  # s
        named = {n: r for n, r in by.items() if n != default and not n.startswith("uplink:") and n not in peers
                 and val(r) is not None}
        ups = {n: r for n, r in by.items() if n.startswith("uplink:") and val(r) is not None}
        d = val(by[default])
        best = None
        for n, r in named.items():
            if best is None or better(val(r), val(named[best])):
                best = n
        up = None
        for n, r in ups.items():
            if up is None or better(val(r), val(ups[up])):
                up = n
        b = val(named[best]) if best else None
        ratio = (d / b if bulk else b / d) if b else None
        upv = val(ups[up]) if up else None
        ok = (ratio is None or ratio >= 0.95) and (upv is None or not better(upv, d))
        misses += not ok
        pt = "" if point is None else f"{point:g}"
        fmt = lambda v: "-" if v is None else f"{v * unit:.3f}"
        print(f'{base:34} {pt:>6} {metric + (" Mb/s" if bulk else " s"):11} {best or "-":>16} {fmt(b):>9} '
              f'{fmt(d):>9} {"-" if ratio is None else f"{ratio:.3f}":>6} {up or "-":>18} {fmt(upv):>9}  '
              f'{"yes" if ok else "NO"}')
print(f"ratio: the default's goodput / the best named scheme's, or the best's mean FCT / the default's "
      f"(1 = as good, > 1 better); misses: {misses}")
PY
