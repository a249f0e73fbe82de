#!/usr/bin/env sh
# The long form of the crash chaos test: hundreds of SIGKILLs of `dra-ledger run` (release
# build with the failpoints feature) against
# `dra-ledger sim` under the churn workload, then the drain and the final checks. Prints the
# counts: kills by mode and failpoint, recoveries and time to ready, allocations observed, the
# ledger's audit counts (allocated, confirmed, released, aborted, imported) and violations.
#
# Usage: controller/scripts/chaos-long.sh [KILLS]   (default 300; DRA_CHAOS_SEED repeats a run,
# DRA_CHAOS_FAULTS=1 also has the simulator inject the API faults of chaos_faults)
set -eu
cd "$(dirname "$0")/../.."
kills="${1:-300}"
DRA_CHAOS_KILLS="$kills" exec cargo test --release -p dra-controller --features failpoints --test chaos -- \
    --nocapture --test-threads 1 kill::controller_killed_at_random_moments
