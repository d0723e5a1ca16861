#!/usr/bin/env bash
# Data-plane cost of braid against wireguard-go, same namespaces, same veth path, same run:
# iperf3 (TCP, client -> server) through braid (encrypted: ChaCha20-Poly1305 with recovery
# "none" and "oec", AES-256-GCM with "none"), and through wireguard-go. Prints throughput, CPU seconds per second of the two tunnel processes, CPU per
# Gbit/s and the ratio to wireguard-go. Needs root, iperf3, wireguard-go, wireguard-tools
# (apt-get install iperf3 wireguard-go wireguard-tools).
#   scripts/bench-daemon.sh [SECONDS] [ROUNDS]
# braid is built with --profile bench: the release build with line tables, for perf.
#   BASELINE=/path/to/older/braid scripts/bench-daemon.sh 8 2   # also that binary, same run
# ROUNDS repeats every measurement, interleaved, so a noisy machine shows as a spread between
# rounds rather than as a difference between tunnels; rows are labelled r<round>.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-8}
ROUNDS=${2:-1}
BASELINE=${BASELINE:-}
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || { echo "bench-daemon: BASELINE $BASELINE is not an executable" >&2; exit 1; }
A=bench-van-$$
B=bench-lan-$$
TMP=$(mktemp -d)
PIDS=()
. scripts/lib/braid-pair.sh
trap pair_cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "bench-daemon: needs root (namespaces, TUN)" >&2; exit 1; }
missing=""
for t in iperf3 wireguard-go wg python3; do command -v $t >/dev/null || missing="$missing $t"; done
[ -z "$missing" ] || { echo "bench-daemon: missing:$missing (apt-get install iperf3 wireguard-go wireguard-tools)" >&2; exit 1; }

cargo build --profile bench --quiet -p braid
BIN=$PWD/target/bench/braid

pair_up

# CPU seconds (user + system) used so far by the given pids.
cpu() { python3 - "$@" <<'PY'
import os, sys
hz = os.sysconf("SC_CLK_TCK"); t = 0
for p in sys.argv[1:]:
    try: f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split(); t += (int(f[11]) + int(f[12])) / hz
    except OSError: pass
print(t)
PY
}

# iperf3 from A to DST through the tunnel whose processes are PIDS; prints "gbps cpu_per_s".
measure() {
  local dst=$1; shift
  ip netns exec "$B" iperf3 -s -1 -B "$dst" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  local c0; c0=$(cpu "$@")
  ip netns exec "$A" iperf3 -c "$dst" -t "$DUR" -J > "$TMP/iperf.json" || true
  local c1; c1=$(cpu "$@")
  wait $srv 2>/dev/null || true
  python3 - "$TMP/iperf.json" "$c0" "$c1" "$DUR" <<'PY'
import json, sys
try: bps = json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]
except Exception: bps = 0.0
print(bps / 1e9, (float(sys.argv[3]) - float(sys.argv[2])) / float(sys.argv[4]))
PY
}

RESULTS=()
braid_keys
# run_braid SCHEME [CIPHER] [LABEL] [BINARY]
run_braid() {
  local scheme=$1 cipher=${2:-chacha20-poly1305} label=${3:-braid-$1} own=$BIN
  BIN=${4:-$BIN}
  braid_up "$scheme" "$cipher" bench || echo "bench-daemon: braid tunnel not up" >&2
  BIN=$own
  RESULTS+=("$label $(measure 10.77.0.1 "$BRAID_S" "$BRAID_C")")
  kill "$BRAID_C" "$BRAID_S"; wait "$BRAID_C" "$BRAID_S" 2>/dev/null || true
  sleep 0.5
}

run_wg() {
  # The UAPI socket /var/run/wireguard/NAME.sock is shared by all namespaces: the ends need distinct names.
  # wireguard-go refuses to run where the kernel has WireGuard unless told it is wanted.
  umask 077
  wg genkey > "$TMP/ka"; wg pubkey < "$TMP/ka" > "$TMP/pa"
  wg genkey > "$TMP/kb"; wg pubkey < "$TMP/kb" > "$TMP/pb"
  ip netns exec "$A" env WG_PROCESS_FOREGROUND=1 WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 wireguard-go -f wga >/dev/null 2>&1 & local a=$!
  ip netns exec "$B" env WG_PROCESS_FOREGROUND=1 WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 wireguard-go -f wgb >/dev/null 2>&1 & local b=$!
  PIDS+=($a $b); sleep 1
  ip netns exec "$A" wg set wga private-key "$TMP/ka" listen-port 51820 peer "$(cat "$TMP/pb")" allowed-ips 10.78.0.0/24 endpoint 10.1.1.1:51821
  ip netns exec "$B" wg set wgb private-key "$TMP/kb" listen-port 51821 peer "$(cat "$TMP/pa")" allowed-ips 10.78.0.0/24 endpoint 10.1.1.2:51820
  ip -n "$A" addr add 10.78.0.2/24 dev wga; ip -n "$A" link set wga up
  ip -n "$B" addr add 10.78.0.1/24 dev wgb; ip -n "$B" link set wgb up
  ip netns exec "$A" ping -c 2 -i 0.2 -q 10.78.0.1 >/dev/null || echo "bench-daemon: wireguard tunnel not up" >&2
  RESULTS+=("${1:-wireguard-go} $(measure 10.78.0.1 $a $b)")
  kill $a $b; wait $a $b 2>/dev/null || true
  ip -n "$A" link del wga 2>/dev/null || true; ip -n "$B" link del wgb 2>/dev/null || true
}

for r in $(seq 1 "$ROUNDS"); do
  p=""; [ "$ROUNDS" = 1 ] || p="r$r-"
  run_braid none chacha20-poly1305 "${p}braid-none"
  run_braid oec chacha20-poly1305 "${p}braid-oec"
  run_braid none aes-256-gcm "${p}braid-none-aes"
  if [ -n "$BASELINE" ]; then
    run_braid none chacha20-poly1305 "${p}base-none" "$BASELINE"
    run_braid oec chacha20-poly1305 "${p}base-oec" "$BASELINE"
    run_braid none aes-256-gcm "${p}base-none-aes" "$BASELINE"
  fi
  run_wg "${p}wireguard-go"
done

python3 - "${RESULTS[@]}" <<'PY'
import re, sys
rows = [r.split() for r in sys.argv[1:]]
rows = [(n, float(g), float(c)) for n, g, c in rows]
# Each row against wireguard-go of its own round (the row whose label ends so and shares its prefix).
def wg_of(name):
    prefix = re.match(r"(r\d+-)?", name).group(0)
    return next((r for r in rows if r[0] == prefix + "wireguard-go"), None)
print(f"{'tunnel':<18} {'Gbit/s':>8} {'CPU s/s':>8} {'CPU s per Gbit':>15} {'tput/wg':>8} {'CPU per Gbit / wg':>18}")
for n, g, c in rows:
    wg = wg_of(n)
    wg_cpg = wg[2] / wg[1] if wg and wg[1] > 0 else None
    cpg = c / g if g > 0 else float("nan")
    rt = g / wg[1] if wg and wg[1] > 0 else float("nan")
    rc = cpg / wg_cpg if wg_cpg else float("nan")
    print(f"{n:<18} {g:>8.3f} {c:>8.2f} {cpg:>15.2f} {rt:>8.2f} {rc:>18.2f}")
PY
