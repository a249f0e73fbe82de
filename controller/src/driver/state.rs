//! The driver's small in-memory state: readiness flags, which pod a claim was last checked for,
//! the last "no node fits" message per pod, allocations in flight (so that a deallocate can
//! abort them), recent deallocations (so that a reconcile does not re-import a claim whose
//! status is about to be cleared) and recent hand-outs (so that a reconcile does not release a
//! pending allocation whose status write is under way).
//!
//! Everything here is bounded and may be lost on restart without harm: the ledger is the record.

use dra_runtime::lock::LockExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The most entries kept in each bounded map before it is pruned.
const MAX_ENTRIES: usize = 4096;

/// How long timestamps are kept when a full map is pruned.
const KEEP_STAMPS: Duration = Duration::from_secs(600);

/// Readiness of the driver: the inventory was synced from the ResourceSlices once and the
/// initial reconcile finished. Clones share the flags.
#[derive(Clone, Debug)]
pub struct DriverReadiness {
    flags: Arc<watch::Sender<(bool, bool)>>,
}

impl Default for DriverReadiness {
    fn default() -> Self {
        Self::new()
    }
}

impl DriverReadiness {
    /// Not ready.
    pub fn new() -> Self {
        DriverReadiness {
            flags: Arc::new(watch::Sender::new((false, false))),
        }
    }

    /// Whether the inventory was synced at least once.
    pub fn inventory_synced(&self) -> bool {
        self.flags.borrow().0
    }

    /// Whether the initial reconcile finished.
    pub fn reconciled(&self) -> bool {
        self.flags.borrow().1
    }

    /// Whether both are done.
    pub fn is_ready(&self) -> bool {
        let (synced, reconciled) = *self.flags.borrow();
        synced && reconciled
    }

    /// Marks the inventory as synced.
    pub fn set_inventory_synced(&self) {
        self.flags.send_modify(|f| f.0 = true);
    }

    /// Marks the initial reconcile as done.
    pub fn set_reconciled(&self) {
        self.flags.send_modify(|f| f.1 = true);
    }

    /// Waits until the inventory is synced.
    pub async fn wait_inventory_synced(&self) {
        let mut rx = self.flags.subscribe();
        let _ = rx.wait_for(|f| f.0).await;
    }

    /// Waits until ready.
    pub async fn wait(&self) {
        let mut rx = self.flags.subscribe();
        let _ = rx.wait_for(|f| f.0 && f.1).await;
    }
}

fn prune<K, V>(map: &mut HashMap<K, V>) {
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
}

#[derive(Default)]
struct Maps {
    /// Claim UID -> UID of the pod whose unsuitable-node check last included it.
    pod_of_claim: HashMap<String, String>,
    /// Pod UID -> last "no node fits" message posted.
    last_message: HashMap<String, String>,
    /// Claim UIDs being allocated -> whether a deallocate asked to abort.
    in_flight: HashMap<String, bool>,
    /// Claim UID -> when it was last deallocated.
    released: HashMap<String, Instant>,
    /// Claim UID -> when an allocation was last returned to the framework for it.
    handed_out: HashMap<String, Instant>,
}

/// Inserts `key` now into a map of timestamps, dropping entries older than `keep` when full.
fn stamp(map: &mut HashMap<String, Instant>, key: &str, keep: Duration) {
    if map.len() >= MAX_ENTRIES {
        map.retain(|_, at| at.elapsed() < keep);
        prune(map);
    }
    map.insert(key.to_owned(), Instant::now());
}

/// The bounded in-memory state of one driver.
#[derive(Default)]
pub(crate) struct DriverState {
    maps: Mutex<Maps>,
}

impl DriverState {
    fn with<T>(&self, f: impl FnOnce(&mut Maps) -> T) -> T {
        let mut maps = self.maps.lock_or_recover();
        f(&mut maps)
    }

    pub(crate) fn remember_pod(&self, claim_uid: &str, pod_uid: &str) {
        self.with(|m| {
            prune(&mut m.pod_of_claim);
            m.pod_of_claim
                .insert(claim_uid.to_owned(), pod_uid.to_owned());
        });
    }

    pub(crate) fn pod_of(&self, claim_uid: &str) -> Option<String> {
        self.with(|m| m.pod_of_claim.get(claim_uid).cloned())
    }

    /// Records `message` for the pod; `true` when it differs from the last one (post it).
    pub(crate) fn message_changed(&self, pod_uid: &str, message: &str) -> bool {
        self.with(|m| {
            if m.last_message
                .get(pod_uid)
                .is_some_and(|last| last == message)
            {
                return false;
            }
            prune(&mut m.last_message);
            m.last_message
                .insert(pod_uid.to_owned(), message.to_owned());
            true
        })
    }

    /// Forgets the pod's last message (some node fits again).
    pub(crate) fn clear_message(&self, pod_uid: &str) {
        self.with(|m| m.last_message.remove(pod_uid));
    }

    pub(crate) fn start_allocation(&self, claim_uids: &[String]) {
        self.with(|m| {
            for uid in claim_uids {
                m.in_flight.insert(uid.clone(), false);
            }
        });
    }

    /// Ends the allocation of `claim_uids`; returns those a deallocate asked to abort.
    pub(crate) fn finish_allocation(&self, claim_uids: &[String]) -> Vec<String> {
        self.with(|m| {
            claim_uids
                .iter()
                .filter(|uid| m.in_flight.remove(*uid) == Some(true))
                .cloned()
                .collect()
        })
    }

    /// Records a deallocation: an allocation in flight is marked for abort.
    pub(crate) fn deallocated(&self, claim_uid: &str) {
        self.with(|m| {
            if let Some(abort) = m.in_flight.get_mut(claim_uid) {
                *abort = true;
            }
            m.pod_of_claim.remove(claim_uid);
            m.handed_out.remove(claim_uid);
            stamp(&mut m.released, claim_uid, KEEP_STAMPS);
        });
    }

    /// Records that an allocation of the claim was returned to the framework just now.
    pub(crate) fn handed_out(&self, claim_uid: &str) {
        self.with(|m| stamp(&mut m.handed_out, claim_uid, KEEP_STAMPS));
    }

    /// Whether an allocation of the claim was returned to the framework within `window` (its
    /// status write may still be under way).
    pub(crate) fn recently_handed_out(&self, claim_uid: &str, window: Duration) -> bool {
        self.with(|m| {
            m.handed_out
                .get(claim_uid)
                .is_some_and(|at| at.elapsed() < window)
        })
    }

    /// Whether the claim was deallocated within `window`.
    pub(crate) fn recently_deallocated(&self, claim_uid: &str, window: Duration) -> bool {
        self.with(|m| {
            m.released
                .get(claim_uid)
                .is_some_and(|at| at.elapsed() < window)
        })
    }
}
