//! The end of a chaos run: with the churn stopped, delete every pod and claim, let the running
//! controller release them, and check what the ledger(s) then hold: nothing allocated, no pending
//! intent, and `ledger verify` passing.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::Client;

use super::checks::{ledger_contents, verify_ledger, LedgerContents};
use super::controller::ControllerProcess;
use super::workload;

/// Deletes the workload and waits up to `timeout` until no pod and no claim is left, reading
/// `controller`'s output meanwhile; panics with its last output when they do not go.
pub async fn drain(client: &Client, controller: &mut ControllerProcess, timeout: Duration) {
    workload::delete_everything(client).await;
    let deadline = Instant::now() + timeout;
    loop {
        let left = workload::remaining(client).await;
        if left == Some((0, 0)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not drained within {timeout:?}: {left:?} (pods, claims) left\n{}",
            controller.recent_output()
        );
        controller.run_for(Duration::from_millis(250)).await;
    }
}

/// Checks a drained ledger (no process may hold it): `ledger verify` passes, no allocation and
/// no pending intent is left. Returns the verify line and the contents (for the audit counts).
pub fn assert_drained(ledger: &Path) -> (String, LedgerContents) {
    let verified = verify_ledger(ledger).unwrap_or_else(|e| panic!("{e}"));
    let contents = ledger_contents(ledger);
    assert!(
        contents.allocations.is_empty() && contents.pending.is_empty(),
        "the drained ledger {} still holds allocations {:?} and pending intents {:?}",
        ledger.display(),
        contents.allocations,
        contents.pending
    );
    (verified.trim().to_owned(), contents)
}
