#!/usr/bin/env bash
# A fleet against one real `braid server`: N emulated vehicles (braid-proto sessions with their
# own handshakes and UDP sockets, driven from one process: crates/braid/examples/fleet.rs) in a
# namespace of their own, over loopback. Prints, per round:
#   - an established vehicle's ping round trip through the server, idle and while the N others
#     join at once (p50, p99, and the ratio of the p99s);
#   - how fast the N join (handshakes/s, initiations and cookie replies it took), and when the
#     slowest pings of the join fell (FLEET_JOIN_RATE=R: the N join at R a second, not at once);
#   - the server's memory per idle session (RSS before the first and after the last join);
#   - LOAD vehicles offering MBIT Mbit/s each: aggregate throughput the server delivered and
#     per-vehicle fairness (Jain's index), with the CPU seconds of server and emulator (the
#     emulator runs on one thread; when it is the one at 1 s/s it, not the server, is the limit).
# The load phase's datagrams are sealed before it starts and then only sent, paced per vehicle
# and batched (sendmmsg; FLEET_GSO=1: UDP GSO), so that the emulator costs little more than the
# kernel's send per packet (FLEET_LOAD=live: the vehicles' sessions seal them as they go).
# Priorities: the emulator's joining vehicles stand for other hosts, so their two threads (their
# sessions; their handshakes' key exchanges) run at SCHED_IDLE while they join and idle
# (FLEET_SCHED=nice: at nice FLEET_NICE, default 19); vehicle 0, whose round trips are measured
# (a ping every FLEET_PING_MS, default 5), runs in a process of its own at SCHED_FIFO 10
# (FLEET_PROBE_RT=0: the ordinary priority); the load phase's traffic is generated at the
# ordinary priority.
# The run is a session of its own (setsid) whose autogroup gets nice $AUTOGROUP_NICE (default -10),
# so that a shared machine's other work (builds) does not set the latency it measures: Linux
# shares the cores between autogroups first, and a woken thread of an equal group waits for a busy
# neighbour's time slice (up to a scheduler tick) often enough to be the p99. The run itself takes
# well under one core outside the load phase (Ctrl-C does not reach a session of its own: the
# run goes on to its end and cleans up; kill its process group to stop it). SHARED=1 runs it in
# the caller's session and priority instead. Without autogroups
# (kernel.sched_autogroup_enabled=0) the script renices itself to $AUTOGROUP_NICE, which the
# server and emulator inherit.
# Needs root (namespace, TUN, priorities). Not a timed test: figures are printed, never asserted.
#   scripts/bench-fleet.sh [N] [LOAD] [MBIT_PER_VEHICLE] [SECS] [ROUNDS]
#   BASELINE=/path/to/older/braid scripts/bench-fleet.sh 1000   # the same rounds with that server too
#   BASELINE_FLEET=/path/to/older/fleet ...   # and the baseline's vehicles run that emulator (the
#                                             # engine's idle traffic is both ends' doing)
#   WORKERS="1 2" scripts/bench-fleet.sh ...  # each round runs this build's server once per value
#                                             # of `workers` (default: the server's default, 1); a
#                                             # baseline runs without the setting
#   PIN=1 WORKERS="1 2" ...                   # the server of `workers = W` runs on CPUs 0..W-1
#                                             # only (taskset), so that 1 worker has one core
#                                             # (the runtime has at least two threads, which an
#                                             # unpinned 1-worker server spreads over both cores)
#   SPLIT=1 ...                               # the emulator (and vehicle 0) on CPU 0, the server
#                                             # on the others (taskset): the vehicles stand for
#                                             # other hosts, so they take none of the server's
#                                             # cores (on loopback the kernel's receive work for
#                                             # what they send is then done on CPU 0 too)
# The load phase's figures to compare across `workers` on a machine whose cores the emulator
# shares: "Mbit/s per core" and "cores" of the server (utime + stime from /proc/PID/stat),
# besides the absolute Mbit/s, which the emulator's share of the cores sets as much as the server.
set -euo pipefail
if [ "${SHARED:-0}" != 1 ] && [ -z "${BENCH_FLEET_SESSION:-}" ]; then
  exec env BENCH_FLEET_SESSION=1 setsid -w bash "$0" "$@"
fi
cd "$(dirname "$0")/.."
N=${1:-1000}
LOAD=${2:-50}
MBIT=${3:-4}
SECS=${4:-5}
ROUNDS=${5:-1}
BASELINE=${BASELINE:-}
BASELINE_FLEET=${BASELINE_FLEET:-}
WORKERS=${WORKERS:-}
[ "$(id -u)" = 0 ] || { echo "bench-fleet: needs root (namespace, TUN)" >&2; exit 1; }
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || { echo "bench-fleet: BASELINE $BASELINE is not an executable" >&2; exit 1; }
if [ "${SPLIT:-0}" = 1 ]; then
  [ "${PIN:-0}" != 1 ] || { echo "bench-fleet: SPLIT=1 and PIN=1 both place the server; set one" >&2; exit 1; }
  [ "$(nproc)" -ge 2 ] || { echo "bench-fleet: SPLIT=1 needs at least 2 CPUs" >&2; exit 1; }
fi
[ -z "$BASELINE_FLEET" ] || [ -x "$BASELINE_FLEET" ] || { echo "bench-fleet: BASELINE_FLEET $BASELINE_FLEET is not an executable" >&2; exit 1; }
NS=bfleet-$$
TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
  [ -z "$SERVER_PID" ] || { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

cargo build --release --quiet -p braid --bin braid --example fleet
BIN=$PWD/target/release/braid
FLEET=$PWD/target/release/examples/fleet
# The priority is set after the build, which runs as the caller's.
AUTOGROUP_NICE=${AUTOGROUP_NICE:--10}
PRIORITY="the caller's session and priority (SHARED=1)"
if [ "${SHARED:-0}" != 1 ]; then
  if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
    echo "$AUTOGROUP_NICE" > "/proc/$$/autogroup"
    PRIORITY="a session of its own, autogroup nice $AUTOGROUP_NICE"
  else
    renice -n "$AUTOGROUP_NICE" -p $$ > /dev/null
    PRIORITY="nice $AUTOGROUP_NICE"
  fi
fi

ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
# The load phase's passenger packets go to 198.18.0.1: dropped by the server's kernel.
ip netns exec "$NS" ip route add blackhole 198.18.0.0/15
ulimit -n 65536 2>/dev/null || true

"$BIN" genkey > "$TMP/server.key"
chmod 600 "$TMP/server.key"
PUB=$("$BIN" pubkey < "$TMP/server.key")
"$FLEET" keys "$N" > "$TMP/vehicles"

# The server's file; with ALLOWED=1 every [[peer]] lists its tunnel address (allowed_ips), which
# servers that route by configured addresses need.
write_config() {
  local allowed=$1 workers=${2:-}
  {
    echo "listen = \"127.0.0.1:7700\""
    [ -z "$workers" ] || echo "workers = $workers"
    echo "private_key = \"$TMP/server.key\""
    echo "tun = { name = \"braidf0\", address = \"10.77.0.1/16\" }"
    echo "control = \"$TMP/server.sock\""
    echo "max_sessions = $((N + 64))"
    local i=0
    while read -r name key; do
      echo "[[peer]]"
      echo "name = \"$name\""
      echo "public_key = \"$key\""
      if [ "$allowed" = 1 ]; then
        echo "allowed_ips = [\"10.77.$((i / 250 + 1)).$((i % 250 + 2))/32\"]"
      fi
      i=$((i + 1))
    done < "$TMP/vehicles"
  } > "$TMP/server.toml"
}

start_server() {
  local bin=$1 cpus=${2:-}
  local pin=()
  [ -z "$cpus" ] || pin=(taskset -c "$cpus")
  ip netns exec "$NS" "${pin[@]}" "$bin" server --config "$TMP/server.toml" > "$TMP/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    [ -S "$TMP/server.sock" ] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# A server that knows allowed_ips takes the file with it; an older one refuses the key.
write_config 1
if ! start_server "$BIN"; then
  if grep -q "allowed_ips" "$TMP/server.log"; then
    write_config 0
    start_server "$BIN" || { cat "$TMP/server.log" >&2; exit 1; }
  else
    cat "$TMP/server.log" >&2
    exit 1
  fi
fi
stop_server

echo "bench-fleet: $N vehicles, $LOAD of them offering $MBIT Mbit/s for $SECS s, $ROUNDS round(s); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); run in $PRIORITY"
ALLOWED=1
grep -q "^allowed_ips" "$TMP/server.toml" || ALLOWED=0
# Each run: a binary and its `workers` value ("-": not set).
RUNS=()
for w in ${WORKERS:--}; do RUNS+=("$BIN:$w"); done
[ -z "$BASELINE" ] || RUNS+=("$BASELINE:-")
for r in $(seq "$ROUNDS"); do
  for run in "${RUNS[@]}"; do
    bin=${run%:*} w=${run##*:}
    [ "$w" != - ] || w=""
    label=braid; [ "$bin" = "$BIN" ] || label=baseline
    fleet=$FLEET; [ "$label" = braid ] || fleet=${BASELINE_FLEET:-$FLEET}
    write_config "$ALLOWED" "$w"
    cpus=""
    [ "${PIN:-0}" != 1 ] || cpus=0-$((${w:-1} - 1))
    [ "${SPLIT:-0}" != 1 ] || cpus=1-$(($(nproc) - 1))
    epin=()
    [ "${SPLIT:-0}" != 1 ] || epin=(taskset -c 0)
    start_server "$bin" "$cpus" || { cat "$TMP/server.log" >&2; exit 1; }
    echo "--- r$r $label${w:+ workers=$w}${cpus:+ on CPUs $cpus}${epin:+, emulator on CPU 0} ($bin, $fleet); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    ip netns exec "$NS" "${epin[@]}" "$fleet" run 127.0.0.1:7700 "$PUB" "$N" "$SERVER_PID" "$TMP/server.sock" "$LOAD" "$MBIT" "$SECS" \
      || { echo "bench-fleet: the emulator failed; server log:" >&2; tail -20 "$TMP/server.log" >&2; }
    stop_server
    sleep 1
  done
done
