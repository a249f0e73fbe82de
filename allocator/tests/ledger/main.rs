//! The ledger's integration tests in one binary: operations, opening and schema checks, the commit
//! guard, concurrent callers, the model test against a map, the fixture files of every released
//! schema version, and the crash tests (a failing storage backend, and a real child process killed
//! with SIGKILL). Fixtures come from `testkit::ledger`.

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod admin_access;
mod commit_guard;
mod concurrency;
mod crash_kill;
mod crash_sync;
mod fixtures;
mod health;
mod history;
mod model;
mod open;
mod ops;
mod rollup;
mod support;
