//! Helpers of the ledger tests beyond `testkit::ledger`: a ledger with devices, an exclusive
//! allocation that must succeed, an assertion on the variant of an error, a file edited
//! behind the ledger's back, and the claims whose history is still raw.

use dra_allocator::ledger::{Allocation, Ledger};
use dra_allocator::model::Sharing;
use tempfile::TempDir;
use testkit::ledger::{allocate, gpus, open, request};

/// Asserts that `$error` matches `$pattern`, showing the error when it does not.
macro_rules! assert_error {
    ($error:expr, $pattern:pat) => {{
        let error = &$error;
        assert!(matches!(error, $pattern), "{error}");
    }};
}
pub(crate) use assert_error;

/// A fresh ledger in its own directory (keep it while the ledger is used) with `count` H100
/// on `node-a`.
pub fn with_h100s(count: usize) -> (TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = open(dir.path());
    ledger.set_inventory("node-a", gpus(count, "H100")).unwrap();
    (dir, ledger)
}

/// Allocates `count` exclusive devices to claim `uid` wherever they fit.
pub fn take(ledger: &Ledger, uid: &str, count: u8) -> Allocation {
    ledger
        .allocate(allocate(uid, None, request(count, Sharing::Exclusive)))
        .unwrap_or_else(|error| panic!("allocate {uid}: {error}"))
}

/// A ledger in its own directory with one H100 on `node-a`, closed again; then `write` runs in
/// a redb write transaction on its file, as a hand edit or a bug would change it. Open the
/// ledger again (`testkit::ledger::open`) to see the result.
pub fn edited_behind_the_ledger(write: impl FnOnce(&redb::WriteTransaction)) -> TempDir {
    let (dir, ledger) = with_h100s(1);
    drop(ledger);
    let db = redb::Database::open(dir.path().join("ledger.redb")).unwrap();
    let txn = db.begin_write().unwrap();
    write(&txn);
    txn.commit().unwrap();
    dir
}

/// The claims with a holder interval still in the history (not rolled up nor pruned), sorted.
pub fn raw_uids(ledger: &Ledger) -> Vec<String> {
    let mut uids: Vec<String> = ledger
        .holder_intervals(0, u64::MAX)
        .unwrap()
        .into_iter()
        .map(|interval| interval.claim_uid)
        .collect();
    uids.sort();
    uids.dedup();
    uids
}
