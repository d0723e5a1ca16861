# Shared by scripts/bench-daemon.sh and scripts/flood-test.sh (source it; needs A, B, TMP, BIN and
# a PIDS array): two namespaces joined by one veth pair, and a braid client/server pair with fresh
# keys across it.

# Kills what was started and removes the namespaces and TMP (install with `trap pair_cleanup EXIT`).
pair_cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.3
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$TMP"
}

# Namespaces A (10.1.1.2 on va0) and B (10.1.1.1 on la0) joined by a veth pair.
pair_up() {
  ip netns add "$A"; ip netns add "$B"
  ip link add va0 netns "$A" type veth peer la0 netns "$B"
  ip -n "$A" addr add 10.1.1.2/24 dev va0; ip -n "$A" link set va0 up; ip -n "$A" link set lo up
  ip -n "$B" addr add 10.1.1.1/24 dev la0; ip -n "$B" link set la0 up; ip -n "$B" link set lo up
}

# Fresh key pairs in TMP (mode 600); sets SPUB and CPUB.
braid_keys() {
  ( umask 077
    "$BIN" genkey > "$TMP/server.key"; "$BIN" genkey > "$TMP/client.key" )
  SPUB=$("$BIN" pubkey < "$TMP/server.key"); CPUB=$("$BIN" pubkey < "$TMP/client.key")
}

# braid_up SCHEME CIPHER PEER: server in B, client in A over va0, recovery SCHEME, cipher CIPHER,
# the client listed as PEER; sets BRAID_S and BRAID_C (pids). Fails if the tunnel does not ping.
braid_up() {
  local scheme=$1 cipher=$2 peer=$3
  cat > "$TMP/c.toml" <<EOT
server = "10.1.1.1:7700"
private_key = "$TMP/client.key"
server_public_key = "$SPUB"
cipher = "$cipher"
tun = { name = "braid0", address = "10.77.0.2/24" }
control = "$TMP/c.sock"
[[uplink]]
name = "a"
interface = "va0"
[session]
recovery = "$scheme"
EOT
  cat > "$TMP/s.toml" <<EOT
listen = "0.0.0.0:7700"
private_key = "$TMP/server.key"
tun = { name = "braid0", address = "10.77.0.1/24" }
control = "$TMP/s.sock"
[[peer]]
name = "$peer"
public_key = "$CPUB"
allowed_ips = ["10.77.0.2/32"]
[session]
recovery = "$scheme"
EOT
  BRAID_LOG=warn ip netns exec "$B" "$BIN" server --config "$TMP/s.toml" & BRAID_S=$!
  PIDS+=("$BRAID_S"); sleep 0.5
  BRAID_LOG=warn ip netns exec "$A" "$BIN" client --config "$TMP/c.toml" & BRAID_C=$!
  PIDS+=("$BRAID_C"); sleep 1.5
  ip netns exec "$A" ping -c 2 -i 0.2 -q 10.77.0.1 >/dev/null
}
