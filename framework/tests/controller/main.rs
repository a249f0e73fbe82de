//! The `v1alpha2` DRA controller framework's tests in one binary, against its fake API server and
//! caches: claim and scheduling-context sync scenarios (the upstream test table), pod claims, the
//! runtime with its workers, the work queue, and the fixes of known upstream bugs.

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod support;

mod claim_scenarios;
mod context_scenarios;
mod pod_claims;
mod runtime;
mod upstream_fixes;
