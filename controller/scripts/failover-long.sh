#!/usr/bin/env sh
# The long form of the failover chaos test: two `dra-ledger run` replicas with leader election
# against `dra-ledger sim` under the churn workload; the leader is killed with SIGKILL, or frozen
# past its lease (every third time), hundreds of times (release build). Prints the counts: leader
# failures by mode, takeovers and their time, allocations observed, both ledgers' audit counts,
# writes the fence of woken leaders refused, and violations.
#
# Usage: controller/scripts/failover-long.sh [FAILURES]   (default 200; DRA_CHAOS_SEED repeats a run)
set -eu
cd "$(dirname "$0")/../.."
failures="${1:-200}"
DRA_FAILOVER_KILLS="$failures" exec cargo test --release -p dra-controller --features failpoints --test chaos -- \
    --nocapture --test-threads 1 failover::
