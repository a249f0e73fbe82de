//! Crash test through a storage backend: syncs succeed until the Nth, which fails, and nothing
//! after it becomes durable. For many N, the ledger works until that failure; then both images a
//! crash can leave (the last synced bytes, or every write that reached the device) are reopened:
//! `verify()` passes, every operation acknowledged before the failure is there, and the ledger
//! accepts new work.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dra_allocator::ledger::{Ledger, LedgerError};
use dra_allocator::model::Sharing;
use testkit::ledger::*;

/// A disk in memory: `volatile` is what was written, `durable` what the last successful sync
/// covered. Syncs after the allowance fail and stay failed.
#[derive(Debug, Clone)]
struct Disk {
    volatile: Arc<Mutex<Vec<u8>>>,
    durable: Arc<Mutex<Vec<u8>>>,
    syncs_left: Arc<AtomicU64>,
    failed: Arc<AtomicBool>,
}

impl Disk {
    fn new(image: Vec<u8>, syncs: u64) -> Self {
        Disk {
            volatile: Arc::new(Mutex::new(image.clone())),
            durable: Arc::new(Mutex::new(image)),
            syncs_left: Arc::new(AtomicU64::new(syncs)),
            failed: Arc::new(AtomicBool::new(false)),
        }
    }

    fn bytes(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.volatile.lock().unwrap()
    }
}

fn out_of_range() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "beyond the end of the disk")
}

impl redb::StorageBackend for Disk {
    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes().len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let bytes = self.bytes();
        let start = usize::try_from(offset).map_err(|_| out_of_range())?;
        let source = bytes
            .get(start..start + out.len())
            .ok_or_else(out_of_range)?;
        out.copy_from_slice(source);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| out_of_range())?;
        self.bytes().resize(len, 0);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        if self.failed.load(Ordering::SeqCst) {
            return Err(io::Error::other("disk failed earlier"));
        }
        if self.syncs_left.load(Ordering::SeqCst) == 0 {
            self.failed.store(true, Ordering::SeqCst);
            return Err(io::Error::other("injected sync failure"));
        }
        self.syncs_left.fetch_sub(1, Ordering::SeqCst);
        let snapshot = self.bytes().clone();
        *self.durable.lock().unwrap() = snapshot;
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut bytes = self.bytes();
        let start = usize::try_from(offset).map_err(|_| out_of_range())?;
        if bytes.len() < start + data.len() {
            bytes.resize(start + data.len(), 0);
        }
        bytes[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }
}

#[derive(Default, Debug)]
struct Acknowledged {
    allocated: BTreeMap<String, Vec<String>>,
    released: BTreeSet<String>,
}

/// Works until the first error; returns what was acknowledged.
fn work_until_failure(ledger: &Ledger) -> Acknowledged {
    let mut acked = Acknowledged::default();
    for node in ["node-a", "node-b"] {
        if ledger.set_inventory(node, gpus(4, "H100")).is_err() {
            return acked;
        }
    }
    for i in 0..40 {
        let uid = format!("u{i}");
        let sharing = if i % 3 == 0 {
            Sharing::Shared { max_consumers: 2 }
        } else {
            Sharing::Exclusive
        };
        match ledger.allocate(allocate(&uid, None, request(1, sharing))) {
            Ok(a) => {
                acked.allocated.insert(uid.clone(), a.devices);
            }
            Err(LedgerError::Unsatisfiable { .. }) => {}
            Err(_) => return acked,
        }
        if i % 2 == 0 && acked.allocated.contains_key(&uid) && ledger.confirm(&uid).is_err() {
            return acked;
        }
        if i % 4 == 1 {
            let victim = format!("u{}", i - 1);
            acked.allocated.remove(&victim);
            match ledger.release(&victim) {
                Ok(_) => {
                    acked.released.insert(victim);
                }
                Err(_) => return acked,
            }
        }
    }
    acked
}

fn check_image(image: Vec<u8>, acked: &Acknowledged, syncs: u64, which: &str) {
    let ledger = Ledger::open_backend(Disk::new(image, u64::MAX), DRIVER, options())
        .unwrap_or_else(|e| panic!("{which} image after sync {syncs} does not open: {e}"));
    let report = ledger.verify().unwrap();
    assert!(
        report.is_consistent(),
        "{which} image after sync {syncs}: {:#?}",
        report.problems
    );
    for (uid, devices) in &acked.allocated {
        let found = ledger.allocation(uid).unwrap();
        assert_eq!(
            found.map(|a| a.devices).as_ref(),
            Some(devices),
            "{which} image after sync {syncs}: acknowledged allocation {uid}"
        );
    }
    for uid in &acked.released {
        assert!(
            ledger.allocation(uid).unwrap().is_none(),
            "{which} image after sync {syncs}: acknowledged release of {uid} was lost"
        );
    }
    ledger.release("u-after").unwrap();
}

#[test]
fn failed_sync_loses_nothing_acknowledged_in_either_crash_image() {
    let mut failures_hit = 0;
    for syncs in 0..70 {
        let disk = Disk::new(Vec::new(), syncs);
        // A failure while the store is being created leaves no ledger to check (a file-based
        // ledger is created under a temporary name and renamed once complete).
        let Ok(ledger) = Ledger::open_backend(disk.clone(), DRIVER, options()) else {
            continue;
        };
        let acked = work_until_failure(&ledger);
        drop(ledger);
        if disk.failed.load(Ordering::SeqCst) {
            failures_hit += 1;
        }
        let durable = disk.durable.lock().unwrap().clone();
        let volatile = disk.volatile.lock().unwrap().clone();
        check_image(durable, &acked, syncs, "synced");
        check_image(volatile, &acked, syncs, "written");
    }
    assert!(
        failures_hit > 50,
        "the injected failure hit only {failures_hit} runs"
    );
}
