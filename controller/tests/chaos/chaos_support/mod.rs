//! Harness of the chaos tests: the simulated cluster as a separate `dra-ledger sim`
//! process, controllers as `dra-ledger run` processes that are killed with SIGKILL and restarted,
//! a churn workload run from the test process, a watch that checks every observed state of the
//! claims, and the checks made while no controller runs and after the workload drained.
//!
//! - [`sim`]: start and stop the simulator (`--kubeconfig-out`, extra flags such as faults);
//! - [`controller`]: one controller process (its own ledger, `--listen 127.0.0.1:0`, extra
//!   flags, failpoints armed through `DRA_LEDGER_FAILPOINTS`): admin address, `/readyz`,
//!   `/metrics`, CPU time and RSS from `/proc`, `kill -9`, SIGTERM;
//! - [`workload`]: the parameter CRDs, class, claim parameters and templates; the churn of
//!   immediate claims and of pods with claim templates; deleting everything at the end;
//! - [`watcher`]: the claim watch checking exclusivity and `maxConsumers` after every event;
//! - [`checks`]: `ledger verify`, cluster against ledger(s), the ledger's contents and audit
//!   counts;
//! - [`drain`]: deleting the workload at the end and checking the drained ledger(s);
//! - [`report`]: the counters a run prints.
//!
//! Everything talks to the cluster over HTTP (`kube::Client` from the simulator's kubeconfig)
//! and to controllers only through their process, admin server and ledger file.

#![allow(dead_code, clippy::doc_markdown)]

pub mod checks;
pub mod controller;
pub mod drain;
pub mod report;
pub mod sim;
pub mod watcher;
pub mod workload;

use std::time::Duration;

/// The driver name the simulator publishes devices for and the controllers run as.
pub const DRIVER: &str = "gpu.dra-ledger.io";

pub use testkit::process::try_signal_pid as signal;

/// Held by every churn test for its whole run: two churns at once on a 2-core machine would
/// stretch the lease timings the failover test depends on.
/// (An async lock: each test has a runtime of its own, and the guard is held across awaits.)
pub async fn one_churn_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static CHURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    CHURN.lock().await
}

/// A number from the environment variable `name`, else `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The seed of a run: `DRA_CHAOS_SEED`, else one taken from the clock (printed by the tests so
/// that a failing run can be repeated).
pub fn seed() -> u64 {
    std::env::var("DRA_CHAOS_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        })
}

/// Retries `call` on conflicts, server errors and transport failures (the faults the simulator
/// injects) with a short backoff, up to `attempts` times; returns the last result.
pub async fn retry<T, F, Fut>(attempts: u32, mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(20);
    let mut attempt = 1;
    loop {
        match call().await {
            Err(error) if attempt < attempts && transient(&error) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(500));
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Whether `error` is worth a retry: 409 Conflict (not AlreadyExists), 429, 5xx, or no answer.
pub fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            (status.code == 409 && status.reason != "AlreadyExists")
                || status.code == 429
                || status.code >= 500
        }
        _ => true,
    }
}

pub use testkit::random::Random;
