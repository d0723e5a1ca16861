#!/usr/bin/env python3
"""FMTCP Fig. 11 criterion (issue 6) from a simulator run's per-second goodput.

    braid sim scenarios/fmtcp-fig11.toml --runs 5 --json --out DIR > fig11.json
    scripts/surge.py fig11.json DIR/throughput.csv [--surge 50 200] [--settle 20]

For each scheme: goodput before the surge (from --settle s, after slow start, to the surge's start),
during it and after it; the surged link's share of what crossed the links before the surge (from
throughput.csv, which holds the first run's per-link down rate); whether goodput during the surge
dropped by less than a third of that share of the pre-surge goodput; and how many seconds after the
surge's end the 5-second mean goodput is back to 90 % of the pre-surge mean.
The surged link is the one whose name the scenario's schedule belongs to: path2 unless --link says.
"""
import argparse
import csv
import json
from collections import defaultdict


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="braid sim --json output")
    ap.add_argument("throughput", help="throughput.csv from braid sim --out DIR")
    ap.add_argument("--surge", nargs=2, type=float, default=[50.0, 200.0], metavar=("START", "END"))
    ap.add_argument("--settle", type=float, default=20.0, help="ignore goodput before this second")
    ap.add_argument("--link", default="path2", help="the link whose loss surges")
    a = ap.parse_args()
    start, end = int(a.surge[0]), int(a.surge[1])

    links = defaultdict(lambda: defaultdict(list))  # scheme -> link -> per-second kbit/s
    with open(a.throughput) as f:
        for row in csv.DictReader(f):
            links[row["scheme"]][row["link"]].append(float(row["down_kbps"]))

    print(f"{'scheme':14} {'before':>8} {'surge':>8} {'after':>8} {'drop':>7} {'share':>6} "
          f"{'limit':>7} {'drop ok':>8} {'recovered':>10}")
    for r in json.load(open(a.json))["results"]:
        g = r.get("goodput_kbps_series") or []
        if len(g) <= end:
            print(f"{r['scheme']:14} no goodput series past {end} s")
            continue
        before, during, after = mean(g[int(a.settle):start]), mean(g[start:end]), mean(g[end + 5:])
        per_link = links[r["scheme"]]
        total = mean([sum(v) for v in zip(*per_link.values())][int(a.settle):start])
        share = mean(per_link[a.link][int(a.settle):start]) / total if total > 0 else float("nan")
        drop = before - during
        limit = share * before / 3
        back = next((t - end for t in range(end, len(g) - 4) if mean(g[t:t + 5]) >= 0.9 * before), None)
        rec = f"{back} s" if back is not None else "never"
        print(f"{r['scheme']:14} {before:8.0f} {during:8.0f} {after:8.0f} {drop:7.0f} {share:6.2f} "
              f"{limit:7.0f} {'yes' if drop < limit else 'no':>8} {rec:>10}")
    print("kbit/s; drop ok: the surge cost less than a third of the surged link's pre-surge share;")
    print("recovered: seconds after the surge until the 5 s mean goodput is 90 % of the pre-surge mean.")


if __name__ == "__main__":
    main()
