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
#   BIN=/path/to/braid ...           another binary
#   ALT_SESSION='scheduler = "round-robin"' ...  and/or ALT_BIN=/path/to/older/braid: a second
#                    variant, run alternately with the first (run 1 of each, run 2 of each, ...),
#                    so both meet the same machine load; each gets its own table
#   TCP_CC=cubic ...                 the passengers' TCP congestion control (iperf3 -C, both
#                    directions); default: this machine's net.ipv4.tcp_congestion_control. BBR
#                    paces at what the tunnel delivers, CUBIC fills the uplinks' queues: braid
#                    must find the capacity with both
#   KEEP=/some/dir ...               keep every run's iperf3 JSON and both ends' final status there
#   POLL=0.2 ...                     both ends' status every 0.2 s during the run (kept with KEEP),
#                    and a column "found s": how long after iperf3 began every uplink's estimate
#                    in the sending direction first stood at 80 % of its rate or more
#   KNOWN="1" ...                    the uplinks (1-based) whose rate the client's [[uplink]] gives
#                    (up_kbps / down_kbps = the tbf rate); the others are found by braid, as with
#                    no rates at all (the default). One uplink known and one not is an operator's
#                    half-filled config, where the known one carries the first burst alone
#   LOG=braid_proto=debug ...        the daemons' log filter (warn); with KEEP each run's logs are kept
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
TCP_CC=${TCP_CC:-$(cat /proc/sys/net/ipv4/tcp_congestion_control)}
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
grep -qw "$TCP_CC" /proc/sys/net/ipv4/tcp_available_congestion_control || modprobe "tcp_$TCP_CC" 2>/dev/null \
  || { echo "bench-bond: TCP_CC=$TCP_CC is not a congestion control this kernel offers ($(cat /proc/sys/net/ipv4/tcp_available_congestion_control))" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p braid
  BIN=$PWD/target/release/braid
fi
[ -x "$BIN" ] || { echo "bench-bond: BIN $BIN is not an executable" >&2; exit 1; }
# Variants: label, binary, [session] body.
VARIANTS=("default")
if [ -n "${ALT_SESSION:-}" ] || [ -n "${ALT_BIN:-}" ]; then
  VARIANTS+=("alt")
  ALT_BIN=${ALT_BIN:-$BIN}
  ALT_SESSION=${ALT_SESSION-$SESSION}
  [ -x "$ALT_BIN" ] || { echo "bench-bond: ALT_BIN $ALT_BIN is not an executable" >&2; exit 1; }
fi
variant() { # variant LABEL: sets CUR_BIN and CUR_SESSION
  if [ "$1" = alt ]; then CUR_BIN=$ALT_BIN; CUR_SESSION=$ALT_SESSION; else CUR_BIN=$BIN; CUR_SESSION=$SESSION; fi
}
variant default

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
      case " ${KNOWN:-} " in *" $i "*) printf 'up_kbps = %d\ndown_kbps = %d\n' "$((RATES[i - 1] * 1000))" "$((RATES[i - 1] * 1000))" ;; esac
    done
    [ -z "$CUR_SESSION" ] || printf '[session]\n%s\n' "$CUR_SESSION"
  } > "$TMP/c.toml"
  {
    echo "listen = \"0.0.0.0:7700\""
    echo "private_key = \"$TMP/server.key\""
    echo "tun = { name = \"braid0\", address = \"10.77.0.1/24\" }"
    echo "control = \"$TMP/s.sock\""
    printf '[[peer]]\nname = "bench"\npublic_key = "%s"\nallowed_ips = ["10.77.0.2/32"]\n' "$CPUB"
    [ -z "$CUR_SESSION" ] || printf '[session]\n%s\n' "$CUR_SESSION"
  } > "$TMP/s.toml"
  BRAID_LOG=${LOG:-warn} ip netns exec "$B" "$CUR_BIN" server --config "$TMP/s.toml" >>"$TMP/server.log" 2>&1 & BRAID_S=$!
  PIDS+=("$BRAID_S"); sleep 0.3
  BRAID_LOG=${LOG:-warn} ip netns exec "$A" "$CUR_BIN" client --config "$TMP/c.toml" >>"$TMP/client.log" 2>&1 & BRAID_C=$!
  PIDS+=("$BRAID_C")
  for _ in $(seq 1 50); do
    ip netns exec "$A" ping -c 1 -W 0.2 -q 10.77.0.1 >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench-bond: tunnel not up" >&2
  tail -n 5 "$TMP/client.log" "$TMP/server.log" >&2
  return 1
}

# CPU time (clock ticks) both daemons have used so far, "client server".
cpu_ticks() {
  local out="" p
  for p in "$BRAID_C" "$BRAID_S"; do
    out="$out $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)"
  done
  echo $out
}
# Share of one core each daemon used between two cpu_ticks over SECONDS (+0.4 s of iperf3 setup):
# "client/server", e.g. 0.45/0.52. On a shared machine, a daemon near 1.0 is the bottleneck.
cpu_share() { # cpu_share "c0 s0" "c1 s1" SECONDS
  python3 -c "import os,sys; a=sys.argv[1].split(); b=sys.argv[2].split(); t=float(sys.argv[3]) + 0.4
hz=os.sysconf('SC_CLK_TCK'); print('/'.join('%.2f' % ((int(y) - int(x)) / hz / t) for x, y in zip(a, b)))" "$1" "$2" "$3"
}

braid_down() {
  kill "$BRAID_C" "$BRAID_S" 2>/dev/null || true
  wait "$BRAID_C" "$BRAID_S" 2>/dev/null || true
  sleep 0.3
  # With KEEP, each run's daemon logs too (LOG=braid_proto=debug for the traces).
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"; local tag; tag="$(date +%H%M%S)"
    for side in client server; do [ ! -s "$TMP/$side.log" ] || mv "$TMP/$side.log" "$KEEP/$tag-$side.log"; done
  fi
}

# iperf3 through the tunnel; the receiver's JSON (0.1 s intervals) into FILE.
iperf() { # iperf DIR FLOWS SECONDS FILE
  local dir=$1 flows=$2 secs=$3 out=$4 rev=""
  [ "$dir" = down ] && rev=-R
  ip netns exec "$B" iperf3 -s -1 -B 10.77.0.1 -J -i 0.1 > "$TMP/srv.json" 2>/dev/null &
  local srv=$! poll=""
  rm -f "$TMP/poll"
  if [ -n "${POLL:-}" ]; then
    # Both ends' status every POLL seconds, one JSON per line, with the time since iperf3 began.
    ( t0=$(date +%s.%N); : > "$TMP/poll"
      while :; do
        for side in c s; do
          printf '%s %s ' "$side" "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b - 0.4 }')" >> "$TMP/poll"
          "$CUR_BIN" status --json --control "$TMP/$side.sock" 2>/dev/null | tr -d '\n' >> "$TMP/poll"; echo >> "$TMP/poll"
        done
        sleep "$POLL"
      done ) &
    poll=$!
  fi
  sleep 0.4
  ip netns exec "$A" timeout $((secs + 20)) iperf3 -c 10.77.0.1 $rev -C "$TCP_CC" -P "$flows" -t "$secs" -i 0.1 -J > "$TMP/cli.json" 2>/dev/null || true
  wait $srv 2>/dev/null || true
  [ -z "$poll" ] || { kill "$poll" 2>/dev/null; wait "$poll" 2>/dev/null || true; }
  if [ "$dir" = down ]; then cp "$TMP/cli.json" "$out"; else cp "$TMP/srv.json" "$out"; fi
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"; local tag; tag="$(date +%H%M%S)-$dir$flows"
    cp "$TMP/cli.json" "$KEEP/$tag-client.json"; cp "$TMP/srv.json" "$KEEP/$tag-server.json"
    [ -z "$poll" ] || cp "$TMP/poll" "$KEEP/$tag-poll.txt"
    for side in c s; do "$CUR_BIN" status --json --control "$TMP/$side.sock" > "$KEEP/$tag-status-$side.json" 2>/dev/null || true; done
  fi
}

# Throughput over the run, over the run less its first second, the longest stall (s) of any flow,
# and the sender's retransmits (iperf3's client reports them in both directions).
analyse() { python3 - "$1" "$2" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    iv = j["intervals"]
except Exception:
    print("0 0 nan nan"); sys.exit()
try:
    retr = json.load(open(sys.argv[2]))["end"]["sum_sent"]["retransmits"]
except Exception:
    retr = "nan"
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
print(f"{mbps(iv):.2f} {mbps(late):.2f} {stall:.1f} {retr}")
PY
}

# Status of both ends: each uplink's capacity estimates (Mbit/s, this end's sending / receiving
# direction) and share of data packets; coded packets per data packet sent, and the passenger
# packets whose wait for an earlier one ran out (skipped) or that came after it did (late).
cat > "$TMP/estimates.py" <<'PY'
import json, sys
try: st = json.load(sys.stdin)
except Exception: sys.exit()
for s in st.get("sessions", []):
    print(" ".join("%s:tx%.1f/rx%.1f/share%.2f" % (u.get("name", "?"), u.get("tx_capacity_kbps", 0) / 1e3,
                   u.get("rx_capacity_kbps", 0) / 1e3, u.get("data_share", 0)) for u in s.get("uplinks", [])),
          "coded/data%.2f skipped%d late%d" % (s.get("coded_sent", 0) / max(1, s.get("data_sent", 0)),
                                             s.get("reorder_skipped", 0), s.get("reorder_late", 0)))
PY
estimates() {
  for side in c s; do
    "$CUR_BIN" status --json --control "$TMP/$side.sock" 2>/dev/null | python3 "$TMP/estimates.py" | sed "s/^/$side /" | tr '\n' ' '
  done
}

# With POLL: seconds after iperf3 began until every uplink's estimate in the sending direction (the
# server's for a download, the client's for an upload) first stood at 0.8 of its tbf rate or more;
# nan if never, - without POLL.
found() { # found DIR
  [ -s "$TMP/poll" ] || { echo -; return; }
  python3 - "$TMP/poll" "$1" "${RATES[@]}" <<'PY'
import json, sys
side = "s" if sys.argv[2] == "down" else "c"
rates = [float(r) * 1e3 for r in sys.argv[3:]]
for line in open(sys.argv[1]):
    p = line.split(" ", 2)
    if len(p) < 3 or p[0] != side:
        continue
    try:
        ups = json.loads(p[2])["sessions"][0]["uplinks"]
    except Exception:
        continue
    est = {u.get("name"): u.get("tx_capacity_kbps", 0) for u in ups}
    if all(est.get(f"u{i + 1}", 0) >= 0.8 * r for i, r in enumerate(rates)):
        print(f"{max(0.0, float(p[1])):.2f}")
        sys.exit()
print("nan")
PY
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
       for v in "${VARIANTS[@]}"; do
        variant "$v"
        braid_up || { ROWS+=("$v $case $t $run $sum $best 0 0 nan nan nan nan -"); braid_down; continue; }
        cpu0=$(cpu_ticks)
        iperf "$dir" "$flows" "$DUR" "$TMP/run.json"
        cpu=$(cpu_share "$cpu0" "$(cpu_ticks)" "$DUR")
        est=$(estimates)
        fnd=$(found "$dir")
        braid_down
        res=$(analyse "$TMP/run.json" "$TMP/cli.json")
        ROWS+=("$v $case $t $run $sum $best $res $cpu $fnd $(echo "$est" | tr ' ' ',')")
        echo "bench-bond: $v $case $t run $run: $res $cpu $fnd Mbit/s (all, after 1 s) stall-s retransmits cpu found-s; $est" >&2
       done
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
     for v in "${VARIANTS[@]}"; do
      variant "$v"
      braid_up || { braid_down; continue; }
      # iperf3 starts 0.4 s from now; the changes are timed from then, not from each other, so
      # the time tc takes does not shift the restore.
      t0=$(date +%s.%N)
      ( until_t() { sleep "$(awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { d = a - b; printf "%.3f", (d > 0 ? d : 0) }')"; }
        until_t "$(awk -v t="$t0" -v d="$DROP_AT" 'BEGIN { printf "%.3f", t + 0.4 + d }')"
        shape "$A" va1 2 change; shape "$B" la1 2 change
        until_t "$(awk -v t="$t0" -v d="$((DROP_AT + DROP_LEN))" 'BEGIN { printf "%.3f", t + 0.4 + d }')"
        shape "$A" va1 20 change; shape "$B" la1 20 change ) &
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
# Time after a change until the throughput over the following half second first reaches 90 % of
# the new sum.
def follow(start, target):
    for k in range(0, 80):
        t0 = start + k * 0.1
        if mbps(t0, t0 + 0.5) >= 0.9 * target:
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
      DROP_ROWS+=("$v $dir $run $res")
      echo "bench-bond: $v drop $dir run $run: $res" >&2
     done
    done
  done
  net_down
fi

echo "passengers' congestion control: $TCP_CC (TCP_CC=...)"
python3 - "$BUF_MS" "${SESSION:-default}" "${ALT_SESSION-}" "${ALT_BIN:-}" "${#ROWS[@]}" "${ROWS[@]}" "${DROP_ROWS[@]}" <<'PY'
import sys
buf, session, alt_session, alt_bin, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
rows = [r.split() for r in sys.argv[6:6 + n]]
drops = [r.split() for r in sys.argv[6 + n:]]
labels = {"default": f"[session] = {session!r}",
          "alt": f"[session] = {alt_session or 'default'!r}" + (f", binary {alt_bin}" if alt_bin else "")}
for var in ["default", "alt"]:
    vrows = [r[1:] for r in rows if r[0] == var]
    vdrops = [r[1:] for r in drops if r[0] == var]
    if not vrows and not vdrops:
        continue
    print(f"braid bonding, {labels[var]}, tbf queue {buf} ms; Mbit/s over the run (and after its first second)")
    if vrows:
        print(f"{'uplinks':<10} {'test':<6} {'runs':>4} {'worst':>7} {'median':>7} {'best':>7} {'worst/sum':>9} {'worst/best-link':>15}"
              f" {'after 1 s worst':>15} {'max stall s':>11} {'max retr':>8} {'max cpu c/s':>11} {'found s worst':>13}")
        groups = {}
        for c, t, run, s, b, m, late, stall, retr, cpu, found, *_ in vrows:
            groups.setdefault((c, t, float(s), float(b)), []).append((float(m), float(late), float(stall), float(retr), cpu, found))
        for (c, t, s, b), v in groups.items():
            ms = sorted(x[0] for x in v)
            cpus = [x[4].split("/") for x in v if "/" in x[4]]
            cpu = "/".join(f"{max(float(p[k]) for p in cpus):.2f}" for k in range(2)) if cpus else "-"
            founds = [float(x[5]) for x in v if x[5] != "-"]
            found = ("nan" if any(f != f for f in founds) else f"{max(founds):.2f}") if founds else "-"
            print(f"{c:<10} {t:<6} {len(v):>4} {ms[0]:>7.2f} {ms[len(ms)//2]:>7.2f} {ms[-1]:>7.2f} {ms[0]/s:>9.2f} {ms[0]/b:>15.2f}"
                  f" {min(x[1] for x in v):>15.2f} {max(x[2] for x in v):>11.1f} {max(x[3] for x in v):>8.0f} {cpu:>11} {found:>13}")
    if vdrops:
        print("drop: 20+20, uplink u1 at 2 Mbit/s for 10 s; Mbit/s before (sum 40), during from +2 s (sum 22), after from +2 s (sum 40);")
        print("      follow = s until a 0.5 s window reaches 90 % of the new sum (nan: never); stall = longest 0 B run of 0.1 s intervals")
        print(f"{'dir':<5} {'run':>3} {'before':>7} {'during':>7} {'after':>7} {'follow down s':>13} {'follow up s':>11} {'stall s':>7}")
        for d in vdrops:
            print(f"{d[0]:<5} {d[1]:>3} " + " ".join(f"{x:>7}" for x in d[2:5]) + f" {d[5]:>13} {d[6]:>11} {d[7]:>7}")
PY
