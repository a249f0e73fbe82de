//! Many concurrent callers against one ledger: group commit never double-allocates, and every
//! caller that got devices finds them after reopening.

use crate::support::with_h100s;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};
use std::thread;

use dra_allocator::ledger::{Allocation, Ledger, LedgerError};
use dra_allocator::model::Sharing;
use testkit::ledger::*;

const THREADS: usize = 24;
const CLAIMS_PER_THREAD: usize = 5;

/// Runs `work(ledger, thread)` on [`THREADS`] threads released together; their results.
fn on_threads<R: Send + 'static>(
    ledger: &Ledger,
    work: impl Fn(&Ledger, usize) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let barrier = Arc::new(Barrier::new(THREADS));
    let work = Arc::new(work);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (ledger, barrier, work) = (ledger.clone(), barrier.clone(), work.clone());
            thread::spawn(move || {
                barrier.wait();
                work(&ledger, t)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn concurrent_callers_never_double_allocate_and_find_their_devices_after_reopen() {
    let (dir, ledger) = with_h100s(8);
    ledger.set_inventory("node-b", gpus(8, "H100")).unwrap();
    let won: Vec<Allocation> = on_threads(&ledger, |ledger, t| {
        let mut won = Vec::new();
        for c in 0..CLAIMS_PER_THREAD {
            let uid = format!("t{t}-c{c}");
            match ledger.allocate(allocate(&uid, None, request(1, Sharing::Exclusive))) {
                Ok(allocation) => won.push(allocation),
                Err(LedgerError::Unsatisfiable { .. }) => {}
                Err(other) => panic!("unexpected error: {other}"),
            }
        }
        won
    })
    .into_iter()
    .flatten()
    .collect();

    assert_eq!(won.len(), 16, "every device is given exactly once");
    let held: BTreeSet<(String, String)> = won
        .iter()
        .map(|a| (a.node.clone(), a.devices[0].clone()))
        .collect();
    assert_eq!(held.len(), won.len(), "a device was given twice");
    let stats = ledger.commit_stats();
    assert!(
        stats.recent.iter().any(|s| s.batch_size > 1),
        "concurrent callers were never batched: {stats:?}"
    );
    assert_consistent(&ledger);
    drop(ledger);

    let reopened = open(dir.path());
    for allocation in &won {
        assert_eq!(
            reopened.allocation(&allocation.claim.uid).unwrap().as_ref(),
            Some(allocation)
        );
    }
    assert_eq!(reopened.utilisation().unwrap().claims_allocated, 16);
    assert_consistent(&reopened);
}

#[test]
fn concurrent_allocate_and_release_with_sharing_keeps_invariants() {
    let (dir, ledger) = with_h100s(3);
    let kept: BTreeMap<String, Vec<String>> = on_threads(&ledger, |ledger, t| {
        let mut kept = BTreeMap::new();
        for round in 0..6 {
            let uid = format!("t{t}-r{round}");
            let sharing = if t % 2 == 0 {
                Sharing::Shared { max_consumers: 3 }
            } else {
                Sharing::Exclusive
            };
            if let Ok(allocation) = ledger.allocate(allocate(&uid, None, request(1, sharing))) {
                if round % 2 == 0 {
                    assert!(ledger.release(&uid).unwrap().is_some());
                } else {
                    kept.insert(uid, allocation.devices);
                }
            }
            // Readers run alongside the writer without errors.
            ledger.nodes().unwrap();
        }
        kept
    })
    .into_iter()
    .flatten()
    .collect();

    assert_consistent(&ledger);
    for device in ledger.node_devices("node-a").unwrap().unwrap() {
        let exclusive = device
            .consumers
            .iter()
            .filter(|c| c.sharing == Sharing::Exclusive)
            .count();
        assert!(exclusive == 0 || device.consumers.len() == 1, "{device:?}");
        assert!(device.consumers.len() <= 3, "{device:?}");
    }
    drop(ledger);
    let reopened = open(dir.path());
    for (uid, devices) in kept {
        assert_eq!(reopened.allocation(&uid).unwrap().unwrap().devices, devices);
    }
    assert_consistent(&reopened);
}

#[test]
fn journal_and_audit_stay_within_retention_when_batches_carry_many_operations() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open_with(
        dir.path().join("ledger.redb"),
        DRIVER,
        dra_allocator::ledger::LedgerOptions {
            audit_retention: 7,
            intent_retention: 5,
            ..options()
        },
    )
    .unwrap();
    ledger.set_inventory("node-a", gpus(8, "H100")).unwrap();
    on_threads(&ledger, |ledger, t| {
        for c in 0..CLAIMS_PER_THREAD {
            let uid = format!("t{t}-c{c}");
            match ledger.allocate(allocate(&uid, None, request(1, Sharing::Exclusive))) {
                Ok(_) => {
                    ledger.release(&uid).unwrap();
                }
                Err(LedgerError::Unsatisfiable { .. }) => {}
                Err(other) => panic!("unexpected error: {other}"),
            }
        }
    });

    let stats = ledger.commit_stats();
    assert!(
        stats.operations > stats.commits,
        "batches of more than one operation"
    );
    assert_eq!(ledger.audit_since(0, 1000).unwrap().len(), 7);
    let report = ledger.verify().unwrap();
    assert!(report.is_consistent(), "{:?}", report.problems);
    assert!(
        report.intents <= 5,
        "journal kept {} entries",
        report.intents
    );
    drop(ledger);
    let reopened = open(dir.path());
    assert_eq!(reopened.audit_since(0, 1000).unwrap().len(), 7);
    assert!(reopened.verify().unwrap().intents <= 5);
}
