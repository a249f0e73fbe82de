//! The chaos suite, against the test-built `dra-ledger` with failpoints (the `failpoints` feature):
//! the controller killed at random moments and at failpoints, the workload under injected API
//! faults, and leader failover between two replicas. The tests take a shared lock, so that one
//! churn at a time has the machine.

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod chaos_support;

mod failover;
mod faults;
mod kill;
