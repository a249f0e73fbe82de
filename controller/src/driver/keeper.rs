//! What the ledger-backed driver and the v1 mirror both are, as keepers of the ledger:
//! [`LedgerKeeper`] holds the ledger with its calls off the async runtime (counted so that a
//! stop can wait for the last one), the readiness flags the keeper raises, the observer it
//! reports to, and the inventory write both share (a node's devices replaced only when they
//! changed).
//!
//! Owns the in-flight permits; must not decide what to write (that is the caller's).

use std::fmt;
use std::sync::Arc;

use dra_allocator::ledger::{InventoryChange, Ledger, LedgerError};
use dra_allocator::model::Device;
use futures::StreamExt;
use tracing::{debug, warn};

use super::{DriverError, DriverObserver, DriverReadiness, NoopObserver, Result};

/// The permits of [`LedgerKeeper`]: more than there can be blocking threads.
const IN_FLIGHT_PERMITS: u32 = 1 << 20;

/// How many node inventories are written at once.
const PARALLEL_WRITES: usize = 16;

/// A ledger, its calls in flight, the keeper's readiness and its observer.
pub(crate) struct LedgerKeeper {
    ledger: Ledger,
    /// One permit per ledger call in flight, held by its blocking thread: a future dropped at
    /// shutdown does not stop a call already running, so [`LedgerKeeper::quiesce`] waits here.
    in_flight: Arc<tokio::sync::Semaphore>,
    readiness: DriverReadiness,
    observer: Arc<dyn DriverObserver>,
}

impl LedgerKeeper {
    /// A keeper of `ledger`, not ready, reporting to nowhere.
    pub(crate) fn new(ledger: Ledger) -> Self {
        LedgerKeeper {
            ledger,
            in_flight: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_PERMITS as usize)),
            readiness: DriverReadiness::new(),
            observer: Arc::new(NoopObserver),
        }
    }

    /// Reports to `observer` instead of nowhere.
    pub(crate) fn set_observer(&mut self, observer: Arc<dyn DriverObserver>) {
        self.observer = observer;
    }

    /// The ledger.
    pub(crate) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The readiness flags (clones share them).
    pub(crate) fn readiness(&self) -> &DriverReadiness {
        &self.readiness
    }

    /// Where metric-relevant facts go.
    pub(crate) fn observer(&self) -> &dyn DriverObserver {
        self.observer.as_ref()
    }

    /// The `Debug` text of the keeper's holder `name`: its ledger, `config` and readiness.
    pub(crate) fn fmt_holder(
        &self,
        f: &mut fmt::Formatter<'_>,
        name: &str,
        config: &dyn fmt::Debug,
    ) -> fmt::Result {
        f.debug_struct(name)
            .field("ledger", &self.ledger)
            .field("config", config)
            .field("ready", &self.readiness.is_ready())
            .finish_non_exhaustive()
    }

    /// Runs `call` on the ledger in a blocking thread; refused once quiesced.
    pub(crate) async fn call<T, F>(&self, call: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Ledger) -> std::result::Result<T, LedgerError> + Send + 'static,
    {
        let ledger = self.ledger.clone();
        let permit = self
            .in_flight
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| DriverError::ShutDown)?;
        tokio::task::spawn_blocking(move || {
            let result = call(&ledger);
            drop(permit);
            result
        })
        .await
        .map_err(DriverError::LedgerTask)?
        .map_err(DriverError::from)
    }

    /// Runs `call`, which must not block (a deferred ledger write: it only queues), on this
    /// thread; refused once quiesced, like every other call.
    pub(crate) fn defer<F>(&self, call: F) -> Result<()>
    where
        F: FnOnce(&Ledger) -> std::result::Result<(), LedgerError>,
    {
        let _permit = self
            .in_flight
            .try_acquire()
            .map_err(|_| DriverError::ShutDown)?;
        call(&self.ledger).map_err(DriverError::from)
    }

    /// Waits until no ledger call is in flight and refuses new ones: after this, the only
    /// handles on the ledger file are the holder's own and its callers' (a ledger call whose
    /// caller was dropped at shutdown still runs to its end in its blocking thread).
    pub(crate) async fn quiesce(&self) {
        // Closed only after all permits are back, so a call never sees a closed semaphore
        // while one is still in flight.
        if let Ok(all) = self.in_flight.acquire_many(IN_FLIGHT_PERMITS).await {
            all.forget();
            self.in_flight.close();
        }
    }

    /// Writes the devices of each node of `pending` unless the ledger already records exactly
    /// those (several nodes at once), logging what changed; returns each node with the outcome,
    /// for the caller to remember or retry.
    ///
    /// The nodes are first checked against the ledger's in-memory inventory all at once; only
    /// those that differ are written, each in a call of its own.
    pub(crate) async fn write_inventories(
        &self,
        pending: Vec<(String, Vec<Device>)>,
    ) -> Vec<(String, Result<()>)> {
        let pending = Arc::new(pending);
        let check = pending.clone();
        // Should the check fail, every node is written: each write reports its own error.
        let changed = self
            .call(move |l| l.inventories_changed(check))
            .await
            .unwrap_or_else(|_| vec![true; pending.len()]);
        let pending = Arc::try_unwrap(pending).unwrap_or_else(|shared| (*shared).clone());
        let mut unchanged = Vec::new();
        let mut to_write = Vec::new();
        for ((node, devices), changed) in pending.into_iter().zip(changed) {
            if changed {
                to_write.push((node, devices));
            } else {
                unchanged.push((node, Ok(())));
            }
        }
        let mut written: Vec<(String, Result<()>)> = futures::stream::iter(to_write)
            .map(|(node, devices)| async move {
                let name = node.clone();
                let result = self
                    .call(move |l| write_if_changed(l, &name, devices))
                    .await
                    .map(|change| log_change(&node, change));
                (node, result)
            })
            .buffer_unordered(PARALLEL_WRITES)
            .collect()
            .await;
        written.extend(unchanged);
        written
    }
}

/// Logs what an inventory write changed, if anything.
fn log_change(node: &str, change: Option<InventoryChange>) {
    if let Some(change) = change {
        if !change.marked_missing.is_empty() {
            warn!(node = %node, devices = ?change.marked_missing, "Allocated devices vanished from their ResourceSlice; marked missing");
        }
        debug!(node = %node, added = change.added.len(), removed = change.removed.len(), "Inventory updated");
    }
}

/// Replaces the devices of `node` unless the ledger already records exactly these as
/// published (so a restart does not rewrite every node); `None` when nothing was written.
fn write_if_changed(
    ledger: &Ledger,
    node: &str,
    devices: Vec<Device>,
) -> std::result::Result<Option<InventoryChange>, LedgerError> {
    let recorded = ledger.node_devices(node)?.unwrap_or_default();
    let unchanged = recorded.iter().all(|r| {
        devices
            .iter()
            .find(|d| d.name == r.name)
            .map_or(r.missing, |d| !r.missing && d.attributes == r.attributes)
    }) && devices
        .iter()
        .all(|d| recorded.iter().any(|r| r.name == d.name));
    if unchanged {
        return Ok(None);
    }
    ledger.set_inventory(node, devices).map(Some)
}
