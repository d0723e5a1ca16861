#!/usr/bin/env bash
# The long fuzz campaign: every braid-fuzz target in a release build, 10 million inputs in total by
# default, split evenly over the targets, one thread at low priority (the build machine is shared).
#
#   scripts/fuzz-long.sh                    # 10,000,000 inputs, seed 1
#   INPUTS=50000000 SEED=7 scripts/fuzz-long.sh
#   TARGETS=session-pair,decode-rlnc TIME_S=600 INPUTS=1000000000 scripts/fuzz-long.sh
#
# Prints inputs, acceptance and inputs/s per target and the totals (also in target/fuzz-long.log);
# exits non-zero if any target panicked, with each crashing input minimised, printed in hex and
# saved under target/fuzz-crashes/ (replay: target/release/braid-fuzz --target T --replay FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
INPUTS=${INPUTS:-10000000}
SEED=${SEED:-1}
cargo build --release -p braid-fuzz
args=(--target "${TARGETS:-all}" --inputs "$INPUTS" --seed "$SEED" --crash-dir target/fuzz-crashes)
if [[ -n "${TIME_S:-}" ]]; then
    args+=(--time-s "$TIME_S")
fi
nice -n 10 target/release/braid-fuzz "${args[@]}" 2>&1 | tee target/fuzz-long.log
