#!/usr/bin/env bash
# Installs (as root, with apt) or checks what the real-kernel testbed uses: iproute2, curl, nginx-light,
# iperf3, mptcpd (mptcpize), kcptun, and what the namespace tests call: ping (iputils-ping) and nft
# (nftables). `--check` only reports; exit 0 when everything is present.
set -euo pipefail
declare -A pkg=([ip]=iproute2 [curl]=curl [nginx]=nginx-light [iperf3]=iperf3 [mptcpize]=mptcpd
  [kcptun-client]=kcptun [kcptun-server]=kcptun [ping]=iputils-ping [nft]=nftables)
missing=()
for cmd in "${!pkg[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("${pkg[$cmd]}")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "testbed-deps: everything the testbed needs is installed"
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "${1:-}" = "--check" ]; then
  echo "testbed-deps: missing Debian packages: ${missing[*]} (run scripts/testbed-deps.sh as root to install)" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "testbed-deps: missing Debian packages: ${missing[*]}; install them as root with apt-get" >&2
  exit 1
fi
echo "testbed-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Debian starts a package's service (nginx's) as it installs it; the testbed runs its own nginx in
# a namespace and needs none. Rather than stopping a service afterwards, which might be the
# host's own, tell the packages not to start any (policy-rc.d exit 101, "action forbidden") for
# the length of the install, unless the host already has a policy of its own.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -q "${missing[@]}" >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
echo "testbed-deps: installed (no service was started or stopped)"
