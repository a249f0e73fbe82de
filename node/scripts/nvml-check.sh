#!/usr/bin/env bash
# Builds dra-ledger with the `nvml` feature and runs `dra-ledger node check --devices nvml` on
# this machine: the GPUs NVML reports (the inventory the agent would publish), then the health
# watch (NVML events and the sysfs checks of the same GPUs) for WATCH (default 30s), one JSON
# object per line. Needs an NVIDIA GPU with its driver (libnvidia-ml.so.1); where NVML is absent
# it fails with a message saying so.
#
#   node/scripts/nvml-check.sh            # 30 s
#   WATCH=2m node/scripts/nvml-check.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
WATCH="${WATCH:-30s}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

cargo build --release --locked -p dra-controller --no-default-features --features nvml \
  --bin dra-ledger >&2
binary="$CARGO_TARGET_DIR/release/dra-ledger"

if ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
  echo "note: ldconfig does not list libnvidia-ml.so.1; NVML will likely not load" >&2
fi
echo "== dra-ledger node check --devices nvml --watch $WATCH ($(hostname))" >&2
exec "$binary" node check --devices nvml --watch "$WATCH"
