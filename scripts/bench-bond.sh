#!/usr/bin/env bash
# Bonding as a new user gets it: `braid client` and `braid server` (release build) with the DEFAULT
# configuration (no [session] table) in two namespaces joined by two or three veth uplinks, each
# shaped by `tbf` in both directions; iperf3 through the tunnel, download and upload, one and four
# flows. Prints Mbit/s against the sum of the uplinks' rates, and the longest TCP stall (the longest
# run of 0.1 s receiver intervals in which a flow got nothing). Then the drop case: one 20 Mbit/s
# uplink falls to 2 Mbit/s for 10 s mid-run (the tbf rate changed live): throughput before, during
# (from 2 s after the drop) and after (from 2 s after the restore), against the sum at each time.
# A benchmark, not a test: the machine's load shows as the spread between runs.
#
#   scripts/bench-bond.sh [RUNS] [SECONDS]
#   CASES="20+5" TESTS="down1 up1" scripts/bench-bond.sh 5 10
#   DROP=0 ...     skip the drop case;  ONLY_DROP=1 ...  only the drop case
#   BUF_MS=50 ...  tbf queue of each uplink, ms at its rate (a modem's buffer)
#   SESSION='recovery = "oec"' ...   a [session] table body for both ends instead of the default
#   BIN=/path/to/braid ...           another binary (e.g. an older build, side by side)
#   KEEP=/some/dir ...               keep every run's iperf3 JSON and both ends' final status there
# Needs root and iperf3 (apt-get install iperf3).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
DUR=${2:-10}
CASES=${CASES:-"20+20 20+5 10+10+10"}
TESTS=${TESTS:-"down1 up1 down4 up4"}
DROP=${DROP:-1}
ONLY_DROP=${ONLY_DROP:-0}
BUF_MS=${BUF_MS:-50}
SESSION=${SESSION:-}
A=bond-van-$$
B=bond-lan-$$
TMP=$(mktemp -d)
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.3
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "bench-bond: needs root (namespaces, TUN, tc)" >&2; exit 1; }
for t in iperf3 python3 tc; do
  command -v $t >/dev/null || [ -x /usr/sbin/$t ] || { echo "bench-bond: missing $t (apt-get install iperf3 iproute2 python3)" >&2; exit 1; }
done
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p braid
  BIN=$PWD/target/release/braid
fi
[ -x "$BIN" ] || { echo "bench-bond: BIN $BIN is not an executable" >&2; exit 1; }

( umask 077; "$BIN" genkey > "$TMP/server.key"; "$BIN" genkey > "$TMP/client.key" )
SPUB=$("$BIN" pubkey < "$TMP/server.key"); CPUB=$("$BIN" pubkey < "$TMP/client.key")

# tbf for RATE Mbit/s with a queue of BUF_MS at that rate; `add` or `change`.
shape() { # shape NS DEV MBIT add|change
  local burst=$(( $3 * 1000 * 1000 / 8 / 250 )) # 4 ms of tokens: one timer tick's worth
  [ "$burst" -ge 3100 ] || burst=3100
  ip netns exec "$1" tc qdisc "$4" dev "$2" root tbf rate "${3}mbit" burst "$burst" latency "${BUF_MS}ms"
}

# Namespaces with one veth pair per rate in RATES (uplink i: 10.1.i.2 in A, 10.1.i.1 in B), the
# server on 192.0.2.1 (B's lo) reachable from A through each.
net_up() {
  ip netns add "$A"; ip netns add "$B"
  ip -n "$A" link set lo up; ip -n "$B" link set lo up
  ip -n "$B" addr add 192.0.2.1/32 dev lo
  local i=0
  for r in "${RATES[@]}"; do
    i=$((i + 1))
    ip link add "va$i" netns "$A" type veth peer "la$i" netns "$B"
    ip -n "$A" addr add "10.1.$i.2/24" dev "va$i"; ip -n "$A" link set "va$i" up
    ip -n "$B" addr add "10.1.$i.1/24" dev "la$i"; ip -n "$B" link set "la$i" up
    ip -n "$A" route add 192.0.2.1 via "10.1.$i.1" dev "va$i" metric $((10 * i))
    shape "$A" "va$i" "$r" add
    shape "$B" "la$i" "$r" add
  done
}

net_down() {
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  sleep 0.2
}

braid_up() {
  {
    echo "server = \"192.0.2.1:7700\""
    echo "private_key = \"$TMP/client.key\""
    echo "server_public_key = \"$SPUB\""
    echo "tun = { name = \"braid0\", address = \"10.77.0.2/24\" }"
    echo "control = \"$TMP/c.sock\""
    local i=0
    for _ in "${RATES[@]}"; do
      i=$((i + 1))
      printf '[[uplink]]\nname = "u%d"\ninterface = "va%d"\n' "$i" "$i"
    done
    [ -z "$SESSION" ] || printf '[session]\n%s\n' "$SESSION"
  } > "$TMP/c.toml"
  {
    echo "listen = \"0.0.0.0:7700\""
    echo "private_key = \"$TMP/server.key\""
    echo "tun = { name = \"braid0\", address = \"10.77.0.1/24\" }"
    echo "control = \"$TMP/s.sock\""
    printf '[[peer]]\nname = "bench"\npublic_key = "%s"\nallowed_ips = ["10.77.0.2/32"]\n' "$CPUB"
    [ -z "$SESSION" ] || printf '[session]\n%s\n' "$SESSION"
  } > "$TMP/s.toml"
  BRAID_LOG=${LOG:-warn} ip netns exec "$B" "$BIN" server --config "$TMP/s.toml" >>"$TMP/server.log" 2>&1 & BRAID_S=$!
  PIDS+=("$BRAID_S"); sleep 0.3
  BRAID_LOG=${LOG:-warn} ip netns exec "$A" "$BIN" client --config "$TMP/c.toml" >>"$TMP/client.log" 2>&1 & BRAID_C=$!
  PIDS+=("$BRAID_C")
  for _ in $(seq 1 50); do
    ip netns exec "$A" ping -c 1 -W 0.2 -q 10.77.0.1 >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench-bond: tunnel not up" >&2
  tail -n 5 "$TMP/client.log" "$TMP/server.log" >&2
  return 1
}

braid_down() {
  kill "$BRAID_C" "$BRAID_S" 2>/dev/null || true
  wait "$BRAID_C" "$BRAID_S" 2>/dev/null || true
  sleep 0.3
}

# iperf3 through the tunnel; the receiver's JSON (0.1 s intervals) into FILE.
iperf() { # iperf DIR FLOWS SECONDS FILE
  local dir=$1 flows=$2 secs=$3 out=$4 rev=""
  [ "$dir" = down ] && rev=-R
  ip netns exec "$B" iperf3 -s -1 -B 10.77.0.1 -J -i 0.1 > "$TMP/srv.json" 2>/dev/null &
  local srv=$!
  sleep 0.4
  ip netns exec "$A" timeout $((secs + 20)) iperf3 -c 10.77.0.1 $rev -P "$flows" -t "$secs" -i 0.1 -J > "$TMP/cli.json" 2>/dev/null || true
  wait $srv 2>/dev/null || true
  if [ "$dir" = down ]; then cp "$TMP/cli.json" "$out"; else cp "$TMP/srv.json" "$out"; fi
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"; local tag; tag="$(date +%H%M%S)-$dir$flows"
    cp "$TMP/cli.json" "$KEEP/$tag-client.json"; cp "$TMP/srv.json" "$KEEP/$tag-server.json"
    for side in c s; do "$BIN" status --json --control "$TMP/$side.sock" > "$KEEP/$tag-status-$side.json" 2>/dev/null || true; done
  fi
}

# Throughput over the run, over the run less its first second, and the longest stall (s) of any flow.
analyse() { python3 - "$1" "${2:-}" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    iv = j["intervals"]
except Exception:
    print("0 0 nan"); sys.exit()
def mbps(ivs):
    b = sum(i["sum"]["bytes"] for i in ivs); t = sum(i["sum"]["seconds"] for i in ivs)
    return b * 8 / t / 1e6 if t > 0 else 0.0
stall = 0.0
for k in range(len(iv[0]["streams"]) if iv else 0):
    run = 0.0
    for i in iv:
        s = i["streams"][k]
        run = run + s["seconds"] if s["bytes"] == 0 else 0.0
        stall = max(stall, run)
late = [i for i in iv if i["sum"]["start"] >= 1.0]
print(f"{mbps(iv):.2f} {mbps(late):.2f} {stall:.1f}")
PY
}

# Status of both ends: each uplink's capacity estimates (Mbit/s, this end's sending / receiving
# direction) and share of data packets.
cat > "$TMP/estimates.py" <<'PY'
import json, sys
try: st = json.load(sys.stdin)
except Exception: sys.exit()
for s in st.get("sessions", []):
    print(" ".join("%s:tx%.1f/rx%.1f/share%.2f" % (u.get("name", "?"), u.get("tx_capacity_kbps", 0) / 1e3,
                   u.get("rx_capacity_kbps", 0) / 1e3, u.get("data_share", 0)) for u in s.get("uplinks", [])))
PY
estimates() {
  for side in c s; do
    "$BIN" status --json --control "$TMP/$side.sock" 2>/dev/null | python3 "$TMP/estimates.py" | sed "s/^/$side /" | tr '\n' ' '
  done
}

ROWS=()
if [ "$ONLY_DROP" != 1 ]; then
  for case in $CASES; do
    IFS=+ read -ra RATES <<< "$case"
    sum=0; for r in "${RATES[@]}"; do sum=$((sum + r)); done
    best=0; for r in "${RATES[@]}"; do [ "$r" -gt "$best" ] && best=$r; done
    net_up
    for t in $TESTS; do
      dir=${t%%[0-9]*}; flows=${t#"$dir"}
      for run in $(seq 1 "$RUNS"); do
        braid_up || { ROWS+=("$case $t $run $sum $best 0 0 nan -"); braid_down; continue; }
        iperf "$dir" "$flows" "$DUR" "$TMP/run.json"
        est=$(estimates)
        braid_down
        res=$(analyse "$TMP/run.json")
        ROWS+=("$case $t $run $sum $best $res $(echo "$est" | tr ' ' ',')")
        echo "bench-bond: $case $t run $run: $res Mbit/s (all, after 1 s) stall s; $est" >&2
      done
    done
    net_down
  done
fi

# The drop case: two 20 Mbit/s uplinks; uplink 1 at 2 Mbit/s from DROP_AT for 10 s.
DROP_ROWS=()
if [ "$DROP" = 1 ] || [ "$ONLY_DROP" = 1 ]; then
  RATES=(20 20)
  DROP_AT=8; DROP_LEN=10; DDUR=$((DROP_AT + DROP_LEN + 8))
  net_up
  for dir in down up; do
    for run in $(seq 1 "$RUNS"); do
      braid_up || { braid_down; continue; }
      ( sleep $((DROP_AT)).4; shape "$A" va1 2 change; shape "$B" la1 2 change
        sleep "$DROP_LEN"; shape "$A" va1 20 change; shape "$B" la1 20 change ) &
      shaper=$!
      iperf "$dir" 1 "$DDUR" "$TMP/drop.json"
      wait $shaper 2>/dev/null || true
      braid_down
      res=$(python3 - "$TMP/drop.json" "$DROP_AT" "$DROP_LEN" <<'PY'
import json, sys
at, ln = float(sys.argv[2]), float(sys.argv[3])
try: iv = json.load(open(sys.argv[1]))["intervals"]
except Exception: print("0 0 0 nan nan nan"); sys.exit()
def mbps(a, b):
    s = [i for i in iv if i["sum"]["start"] >= a - 1e-6 and i["sum"]["end"] <= b + 1e-6]
    t = sum(i["sum"]["seconds"] for i in s)
    return sum(i["sum"]["bytes"] for i in s) * 8 / t / 1e6 if t else 0.0
# Time after a change until the throughput over the following second first reaches 80 % of the new sum.
def follow(start, target):
    for k in range(0, 60):
        t0 = start + k * 0.1
        if mbps(t0, t0 + 1.0) >= 0.8 * target:
            return k * 0.1
    return float("nan")
stall = 0.0; run = 0.0
for i in iv:
    run = run + i["sum"]["seconds"] if i["sum"]["bytes"] == 0 else 0.0
    stall = max(stall, run)
end = iv[-1]["sum"]["end"] if iv else 0
print(f"{mbps(1, at):.2f} {mbps(at + 2, at + ln):.2f} {mbps(at + ln + 2, end):.2f} "
      f"{follow(at, 22):.1f} {follow(at + ln, 40):.1f} {stall:.1f}")
PY
)
      DROP_ROWS+=("$dir $run $res")
      echo "bench-bond: drop $dir run $run: $res" >&2
    done
  done
  net_down
fi

python3 - "$BUF_MS" "${SESSION:-default}" "${#ROWS[@]}" "${ROWS[@]}" "${DROP_ROWS[@]}" <<'PY'
import sys
buf, session, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [r.split() for r in sys.argv[4:4 + n]]
drops = [r.split() for r in sys.argv[4 + n:]]
print(f"braid bonding, [session] = {session!r}, tbf queue {buf} ms; Mbit/s over the run (and after its first second)")
if rows:
    print(f"{'uplinks':<10} {'test':<6} {'runs':>4} {'worst':>7} {'median':>7} {'best':>7} {'worst/sum':>9} {'worst/best-link':>15} {'after 1 s worst':>15} {'max stall s':>11}")
    groups = {}
    for c, t, run, s, b, m, late, stall, *_ in rows:
        groups.setdefault((c, t, float(s), float(b)), []).append((float(m), float(late), float(stall)))
    for (c, t, s, b), v in groups.items():
        ms = sorted(x[0] for x in v)
        print(f"{c:<10} {t:<6} {len(v):>4} {ms[0]:>7.2f} {ms[len(ms)//2]:>7.2f} {ms[-1]:>7.2f} {ms[0]/s:>9.2f} {ms[0]/b:>15.2f}"
              f" {min(x[1] for x in v):>15.2f} {max(x[2] for x in v):>11.1f}")
if drops:
    print("drop: 20+20, uplink u1 at 2 Mbit/s for 10 s; Mbit/s before (sum 40), during from +2 s (sum 22), after from +2 s (sum 40);")
    print("      follow = s until a 1 s window reaches 80 % of the new sum; stall = longest 0 B run of 0.1 s intervals")
    print(f"{'dir':<5} {'run':>3} {'before':>7} {'during':>7} {'after':>7} {'follow down s':>13} {'follow up s':>11} {'stall s':>7}")
    for d in drops:
        print(f"{d[0]:<5} {d[1]:>3} " + " ".join(f"{x:>7}" for x in d[2:5]) + f" {d[5]:>13} {d[6]:>11} {d[7]:>7}")
PY
