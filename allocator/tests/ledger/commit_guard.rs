//! The commit guard: while it refuses, no batch is committed, every caller gets `Fenced`, and
//! neither the file nor the in-memory inventory keeps anything of the refused operations.

use crate::support::{assert_error, take};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dra_allocator::ledger::{Ledger, LedgerError, LedgerOptions};
use dra_allocator::model::Sharing;
use testkit::ledger::*;

/// Opens a ledger whose guard refuses while `fenced` is set.
fn open_guarded(dir: &std::path::Path, fenced: &Arc<AtomicBool>) -> Ledger {
    let flag = fenced.clone();
    let options = LedgerOptions {
        commit_guard: Some(Arc::new(move || {
            if flag.load(Ordering::SeqCst) {
                Err(Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(
                    "lease lost",
                )))
            } else {
                Ok(())
            }
        })),
        ..options()
    };
    Ledger::open_with(dir.join("ledger.redb"), DRIVER, options).expect("open ledger")
}

#[test]
fn refused_commit_writes_nothing_and_names_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let fenced = Arc::new(AtomicBool::new(false));
    let ledger = open_guarded(dir.path(), &fenced);
    ledger.set_inventory("node-a", gpus(2, "H100")).unwrap();

    fenced.store(true, Ordering::SeqCst);
    let error = ledger
        .allocate(allocate("u1", None, request(2, Sharing::Exclusive)))
        .unwrap_err();
    assert_error!(error, LedgerError::Fenced { .. });
    assert!(error.to_string().contains("lease lost"), "{error}");
    assert_eq!(error.kind(), "fenced");
    let error = ledger.set_inventory("node-b", gpus(1, "H100")).unwrap_err();
    assert_error!(error, LedgerError::Fenced { .. });

    assert!(ledger.allocation("u1").unwrap().is_none());
    assert!(ledger.pending_intents().unwrap().is_empty());
    assert_eq!(ledger.nodes().unwrap().len(), 1);
    assert_consistent(&ledger);

    // The in-memory inventory was reloaded: both devices are free for the next allocation.
    fenced.store(false, Ordering::SeqCst);
    let other = take(&ledger, "u2", 2);
    assert_eq!(other.devices.len(), 2);
    assert_consistent(&ledger);
}

#[test]
fn refused_batch_leaves_the_file_as_the_last_allowed_commit() {
    let dir = tempfile::tempdir().unwrap();
    let fenced = Arc::new(AtomicBool::new(false));
    {
        let ledger = open_guarded(dir.path(), &fenced);
        ledger.set_inventory("node-a", gpus(4, "H100")).unwrap();
        take(&ledger, "kept", 1);
        fenced.store(true, Ordering::SeqCst);
        assert!(ledger.release("kept").is_err());
        assert!(ledger
            .allocate(allocate("lost", None, request(1, Sharing::Exclusive)))
            .is_err());
    }
    let reopened = open(dir.path());
    assert!(reopened.allocation("kept").unwrap().is_some());
    assert!(reopened.allocation("lost").unwrap().is_none());
    assert_eq!(reopened.pending_intents().unwrap().len(), 1);
    assert_consistent(&reopened);
}

#[test]
fn concurrent_callers_all_see_the_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let fenced = Arc::new(AtomicBool::new(false));
    let ledger = open_guarded(dir.path(), &fenced);
    ledger.set_inventory("node-a", gpus(8, "H100")).unwrap();
    fenced.store(true, Ordering::SeqCst);

    let threads: Vec<_> = (0..8)
        .map(|i| {
            let ledger = ledger.clone();
            std::thread::spawn(move || {
                ledger.allocate(allocate(
                    &format!("u{i}"),
                    None,
                    request(1, Sharing::Exclusive),
                ))
            })
        })
        .collect();
    for thread in threads {
        let error = thread.join().unwrap().unwrap_err();
        assert_error!(error, LedgerError::Fenced { .. });
    }
    assert_eq!(ledger.nodes().unwrap()[0].counts.allocated, 0);
    assert_consistent(&ledger);
}
