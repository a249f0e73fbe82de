//! The durable ledger: one redb file holding the device inventory, the allocations keyed by claim
//! UID, the admin-access claims apart from them, device health, the intent journal, the audit
//! log and the history of every device's holders and events (tables and their invariants in
//! [`tables`]).
//!
//! Writes go through one writer thread with group commit (see `writer`): every write method
//! blocks until the durable commit that carries it, so an allocation returned to the caller is
//! already on disk as an intent. The one exception, [`Ledger::confirm_deferred`], writes what a
//! crash may lose: a confirmation, which the next start rolls forward from the cluster. Reads use
//! their own snapshots and never wait for the writer. Methods are blocking; async callers use
//! `spawn_blocking`. The fitting decisions come from [`crate::fit`]; this module owns all storage
//! and must not be imported by `model` or `fit`.

pub mod admin_access;
mod error;
pub mod health;
pub mod history;
mod inventory;
mod open;
mod ops;
pub mod records;
mod stats;
mod store;
pub mod tables;
mod txn;
pub mod types;
mod verify;
mod views;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, ReadTransaction, ReadableDatabase};

pub use admin_access::{AdminAccess, AdminAccessChange, AdminAccessQuery, AdminAccessRequest};
pub use error::{LedgerError, Result};
pub use health::{DeviceHealth, HealthChange, UnhealthyDevice};
pub use history::{DeviceEvent, DeviceEventKind, DeviceHistory};
pub use stats::{CommitHook, CommitSample, CommitStats, RECENT_COMMITS};
pub use store::{system_clock, Clock};
pub use types::{
    same_placement, AllocateRequest, Allocation, AllocationPage, AllocationQuery, AllocationState,
    AuditEntry, AuditEvent, ClaimDetail, ClaimRef, DeviceConsumer, DeviceCounts, DeviceStatus,
    ImportRequest, Intent, IntentKind, InventoryChange, NodeSummary, PendingIntent,
    PodClaimRequest, Resolution, Utilisation, VerifyReport,
};

use stats::StatsRecorder;
use writer::WriterHandle;

use crate::fit::{self, NamedRequest, Reservations, UnsuitableNode};
use crate::model::{Device, EffectiveRequest};
use crate::usage::{self, HolderInterval, Usage, UsageBy};

/// How a ledger is opened.
#[derive(Clone)]
pub struct LedgerOptions {
    /// Source of timestamps (unix milliseconds).
    pub clock: Clock,
    /// Audit entries kept; older ones are pruned (at least 1).
    pub audit_retention: u64,
    /// Resolved journal entries kept; open intents are never pruned (at least 1).
    pub intent_retention: u64,
    /// How long history is kept: holder intervals that ended and device events older than this
    /// are pruned, a bounded number per commit. Intervals still open are never pruned.
    pub history_retention: std::time::Duration,
    /// How long holder intervals stay as they are after they end: older ones are rolled up into
    /// hourly totals per namespace, node and model (what usage needs), a bounded number per
    /// commit, and no longer listed one by one. Should be below `history_retention` (else the
    /// intervals are pruned before they are rolled up).
    pub history_rollup_after: std::time::Duration,
    /// Most operations in one commit.
    pub max_batch: usize,
    /// How long a deferred write ([`Ledger::confirm_deferred`]) waits for other writes to be
    /// committed with before it is committed alone, without a sync.
    pub defer_limit: std::time::Duration,
    /// redb page cache in bytes.
    pub cache_bytes: usize,
    /// Called after every commit with its batch size and latency.
    pub on_commit: Option<CommitHook>,
    /// Asked right before every commit; an `Err` refuses the whole batch (nothing is written,
    /// every caller gets [`LedgerError::Fenced`]). Leader election uses it so that a process
    /// that lost its lease commits nothing more.
    pub commit_guard: Option<CommitGuard>,
}

/// The default of [`LedgerOptions::history_retention`]: 90 days.
pub const DEFAULT_HISTORY_RETENTION: std::time::Duration =
    std::time::Duration::from_secs(90 * 24 * 3600);

/// The default of [`LedgerOptions::history_rollup_after`]: 7 days.
pub const DEFAULT_HISTORY_ROLLUP_AFTER: std::time::Duration =
    std::time::Duration::from_secs(7 * 24 * 3600);

/// See [`LedgerOptions::commit_guard`]: `Ok(())` lets a commit proceed, `Err(refusal)` refuses it.
pub type CommitGuard = Arc<dyn Fn() -> std::result::Result<(), CommitRefusal> + Send + Sync>;

/// Why a [`CommitGuard`] refused a commit: the guard's own error, shared by every caller of the
/// refused batch as the source of its [`LedgerError::Fenced`].
pub type CommitRefusal = Arc<dyn std::error::Error + Send + Sync>;

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions {
            clock: system_clock(),
            audit_retention: 100_000,
            intent_retention: 100_000,
            history_retention: DEFAULT_HISTORY_RETENTION,
            history_rollup_after: DEFAULT_HISTORY_ROLLUP_AFTER,
            max_batch: 256,
            defer_limit: std::time::Duration::from_millis(50),
            cache_bytes: 16 * 1024 * 1024,
            on_commit: None,
            commit_guard: None,
        }
    }
}

impl std::fmt::Debug for LedgerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerOptions")
            .field("audit_retention", &self.audit_retention)
            .field("intent_retention", &self.intent_retention)
            .field("history_retention", &self.history_retention)
            .field("history_rollup_after", &self.history_rollup_after)
            .field("max_batch", &self.max_batch)
            .field("defer_limit", &self.defer_limit)
            .field("cache_bytes", &self.cache_bytes)
            .finish_non_exhaustive()
    }
}

struct Inner {
    // Declared first so it drops (joining the writer) before the database handle.
    writer: WriterHandle,
    db: Arc<Database>,
    path: PathBuf,
    driver_name: String,
    stats: Arc<StatsRecorder>,
    clock: Clock,
    rollup_after_ms: u64,
}

/// A handle to an open ledger file; cheap to clone and shareable between threads.
#[derive(Clone)]
pub struct Ledger {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.inner.path)
            .field("driver_name", &self.inner.driver_name)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// Opens (or creates) the ledger at `path` for `driver_name` with default options.
    ///
    /// An older schema is migrated after a backup copy; a newer one, a corrupt file or a file of
    /// another driver is refused with a clear error.
    ///
    /// ```
    /// use dra_allocator::ledger::Ledger;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com")?;
    /// assert_eq!(ledger.driver_name(), "gpu.example.com");
    /// assert!(ledger.nodes()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, driver_name: &str) -> Result<Ledger> {
        Self::open_with(path, driver_name, LedgerOptions::default())
    }

    /// Opens (or creates) the ledger at `path` with `options`.
    pub fn open_with(
        path: impl AsRef<Path>,
        driver_name: &str,
        options: LedgerOptions,
    ) -> Result<Ledger> {
        open::open_file(path.as_ref(), driver_name, options)
    }

    /// Opens a ledger on a custom redb storage backend, initialising it when empty (in-memory
    /// ledgers, fault-injection tests). There is no file, so no inspection, migration or backup
    /// copy: a backend holding another schema version or another driver's ledger is refused.
    pub fn open_backend(
        backend: impl redb::StorageBackend,
        driver_name: &str,
        options: LedgerOptions,
    ) -> Result<Ledger> {
        open::open_backend(backend, driver_name, options)
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The driver the ledger belongs to.
    pub fn driver_name(&self) -> &str {
        &self.inner.driver_name
    }

    fn read(&self) -> Result<ReadTransaction> {
        self.inner.db.begin_read().map_err(LedgerError::storage)
    }

    /// Allocates one claim (on `request.node`, or the best node by policy). Idempotent: a repeat
    /// returns the same devices; a repeat with other parameters is [`LedgerError::ClaimConflict`]
    /// until released. Returns once the intent and the reservation are durable.
    ///
    /// ```
    /// use dra_allocator::ledger::{AllocateRequest, AllocationState, ClaimRef, Ledger};
    /// use dra_allocator::model::{ClassDefaults, Device, EffectiveRequest};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// # let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com")?;
    /// ledger.set_inventory("node-a", vec![Device::new("gpu-0"), Device::new("gpu-1")])?;
    /// let request = AllocateRequest {
    ///     claim: ClaimRef::new("uid-1", "default", "gpu"),
    ///     pod_uid: None,
    ///     request: EffectiveRequest::from_class(&ClassDefaults::default())?,
    ///     node: None, // the best node by the class policy
    /// };
    /// let allocation = ledger.allocate(request.clone())?;
    /// assert_eq!(allocation.node, "node-a");
    /// assert_eq!(allocation.devices, ["gpu-0"]);
    /// assert_eq!(allocation.state, AllocationState::Pending);
    /// assert_eq!(ledger.allocate(request)?.devices, ["gpu-0"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn allocate(&self, request: AllocateRequest) -> Result<Allocation> {
        self.inner
            .writer
            .submit(move |tx| ops::allocate(tx, &request))
    }

    /// Allocates all `claims` of pod `pod_uid` on `node` in one transaction, all or nothing.
    /// Claims already allocated there with the same parameters are returned unchanged.
    pub fn allocate_pod(
        &self,
        pod_uid: &str,
        node: &str,
        claims: Vec<PodClaimRequest>,
    ) -> Result<Vec<Allocation>> {
        let (pod_uid, node) = (pod_uid.to_owned(), node.to_owned());
        self.inner
            .writer
            .submit(move |tx| ops::allocate_pod(tx, &pod_uid, &node, &claims))
    }

    /// Marks the claim's allocation as seen in the cluster (resolves its intent). Idempotent.
    pub fn confirm(&self, uid: &str) -> Result<Allocation> {
        let uid = uid.to_owned();
        self.inner.writer.submit(move |tx| ops::confirm(tx, &uid))
    }

    /// Queues a confirmation of the claim's allocation, applied only if the claim is still
    /// allocated on `node` with the same set of `devices`, and returns at once. It is committed
    /// with the next batch of other writes (or alone after [`LedgerOptions::defer_limit`]) and
    /// synced by the next durable commit: a crash before that loses it, and the intent stays
    /// pending until the next start rolls it forward from the cluster. Fails only when the
    /// ledger is closing.
    ///
    /// ```
    /// use dra_allocator::ledger::{AllocateRequest, AllocationState, ClaimRef, Ledger};
    /// use dra_allocator::model::{ClassDefaults, Device, EffectiveRequest};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// # let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com")?;
    /// ledger.set_inventory("node-a", vec![Device::new("gpu-0")])?;
    /// let allocation = ledger.allocate(AllocateRequest {
    ///     claim: ClaimRef::new("uid-1", "default", "gpu"),
    ///     pod_uid: None,
    ///     request: EffectiveRequest::from_class(&ClassDefaults::default())?,
    ///     node: None,
    /// })?;
    /// ledger.confirm_deferred("uid-1", &allocation.node, &allocation.devices)?;
    /// // A write that waits for its commit also carries what was deferred before it.
    /// ledger.cordon("node-a", "gpu-0")?;
    /// assert_eq!(ledger.allocation("uid-1")?.unwrap().state, AllocationState::Confirmed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn confirm_deferred(&self, uid: &str, node: &str, devices: &[String]) -> Result<()> {
        let (uid, node, devices) = (uid.to_owned(), node.to_owned(), devices.to_vec());
        self.inner
            .writer
            .defer(format!("confirm {uid}"), move |tx| {
                ops::confirm_if_placed(tx, &uid, &node, &devices).map(|_| ())
            })
    }

    /// Frees the claim's devices. Idempotent: `None` when the claim had no allocation.
    ///
    /// ```
    /// use dra_allocator::ledger::{AllocateRequest, ClaimRef, Ledger};
    /// use dra_allocator::model::{ClassDefaults, Device, EffectiveRequest};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// # let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com")?;
    /// ledger.set_inventory("node-a", vec![Device::new("gpu-0")])?;
    /// ledger.allocate(AllocateRequest {
    ///     claim: ClaimRef::new("uid-1", "default", "gpu"),
    ///     pod_uid: None,
    ///     request: EffectiveRequest::from_class(&ClassDefaults::default())?,
    ///     node: Some("node-a".into()),
    /// })?;
    /// let released = ledger.release("uid-1")?;
    /// assert_eq!(released.map(|a| a.devices), Some(vec!["gpu-0".to_owned()]));
    /// assert_eq!(ledger.release("uid-1")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(&self, uid: &str) -> Result<Option<Allocation>> {
        let uid = uid.to_owned();
        self.inner.writer.submit(move |tx| ops::release(tx, &uid))
    }

    /// Drops a pending allocation that never reached the cluster; `None` when there is none.
    /// A confirmed allocation is [`LedgerError::AbortConfirmed`].
    pub fn abort(&self, uid: &str) -> Result<Option<Allocation>> {
        let uid = uid.to_owned();
        self.inner.writer.submit(move |tx| ops::abort(tx, &uid))
    }

    /// Records an allocation the cluster shows as confirmed (rebuilding a lost ledger).
    pub fn import(&self, request: ImportRequest) -> Result<Allocation> {
        self.inner
            .writer
            .submit(move |tx| inventory::import(tx, &request))
    }

    /// Replaces the published devices of `node`. Allocated devices that vanish are kept as
    /// missing; free ones are removed.
    pub fn set_inventory(&self, node: &str, devices: Vec<Device>) -> Result<InventoryChange> {
        let node = node.to_owned();
        self.inner
            .writer
            .submit(move |tx| inventory::set_inventory(tx, &node, &devices))
    }

    /// Takes a device out of allocation; existing consumers keep it. `true` when it changed.
    pub fn cordon(&self, node: &str, device: &str) -> Result<bool> {
        let (node, device) = (node.to_owned(), device.to_owned());
        self.inner
            .writer
            .submit(move |tx| inventory::set_cordon(tx, &node, &device, true))
    }

    /// Puts a cordoned device back into allocation. `true` when it changed.
    pub fn uncordon(&self, node: &str, device: &str) -> Result<bool> {
        let (node, device) = (node.to_owned(), device.to_owned());
        self.inner
            .writer
            .submit(move |tx| inventory::set_cordon(tx, &node, &device, false))
    }

    /// Per node device counts, by node name.
    pub fn nodes(&self) -> Result<Vec<NodeSummary>> {
        views::nodes(&self.read()?)
    }

    /// For each of `nodes` (a node with the devices its slices publish now), whether the ledger
    /// records other devices for it: another device set or attributes, or a recorded device the
    /// list lacks that is not marked missing yet. Read from the writer's in-memory inventory,
    /// without a transaction, so that a start checks thousands of unchanged nodes at the cost
    /// of one call; [`Ledger::set_inventory`] decides again in its own transaction.
    pub fn inventories_changed(&self, nodes: Arc<Vec<(String, Vec<Device>)>>) -> Result<Vec<bool>> {
        self.inner.writer.read(move |state| {
            Ok(nodes
                .iter()
                .map(|(node, devices)| !state.inventory.publishes_exactly(node, devices))
                .collect())
        })
    }

    /// The devices of `node` with their state; `None` for a node without devices.
    pub fn node_devices(&self, node: &str) -> Result<Option<Vec<DeviceStatus>>> {
        views::node_devices(&self.read()?, node)
    }

    /// The allocation of claim `uid`.
    pub fn allocation(&self, uid: &str) -> Result<Option<Allocation>> {
        views::allocation(&self.read()?, uid)
    }

    /// The gang check against the writer's in-memory inventory as the last commit left it (no
    /// read of the file, no commit): the `candidates` that cannot hold all `claims` together,
    /// each with its reason. Devices held by the claims in `ignore` count as free for the check
    /// (a pod's own earlier, possibly stale, allocations must not block it).
    pub fn unsuitable_nodes(
        &self,
        claims: Vec<(String, EffectiveRequest)>,
        candidates: Vec<String>,
        ignore: &[String],
    ) -> Result<Vec<UnsuitableNode>> {
        let mut held = Vec::new();
        for uid in ignore {
            if let Some(allocation) = self.allocation(uid)? {
                held.push(allocation);
            }
        }
        self.inner.writer.read(move |state| {
            let named: Vec<NamedRequest<'_>> = claims
                .iter()
                .map(|(name, request)| NamedRequest { name, request })
                .collect();
            // The pod's own holds are left out inside the check; the inventory is not copied.
            let mut own = Reservations::new();
            for allocation in &held {
                for device in &allocation.devices {
                    own.release(&allocation.node, device, &allocation.claim.uid);
                }
            }
            Ok(fit::unsuitable_nodes(
                &state.inventory,
                &named,
                &candidates,
                &own,
            ))
        })
    }

    /// The claim's allocation and intent history; `None` when the ledger never saw it (or its
    /// history was pruned).
    pub fn claim(&self, uid: &str) -> Result<Option<ClaimDetail>> {
        views::claim(&self.read()?, uid)
    }

    /// A page of allocations by claim UID, optionally filtered by namespace and node.
    pub fn allocations(&self, query: &AllocationQuery) -> Result<AllocationPage> {
        views::allocations(&self.read()?, query)
    }

    /// Allocations whose intent is durable but not yet confirmed, by intent id; after a crash,
    /// the controller resolves each against the cluster.
    pub fn pending_intents(&self) -> Result<Vec<PendingIntent>> {
        views::pending_intents(&self.read()?)
    }

    /// Audit entries with a sequence number above `after`, at most `limit`.
    pub fn audit_since(&self, after: u64, limit: usize) -> Result<Vec<AuditEntry>> {
        views::audit_since(&self.read()?, after, limit)
    }

    /// Every holder interval that overlaps `[from_ms, to_ms)` (unix milliseconds), oldest first,
    /// each with its device's `model` attribute where the ledger still records the device: the
    /// input of [`crate::usage::usage`].
    pub fn holder_intervals(&self, from_ms: u64, to_ms: u64) -> Result<Vec<HolderInterval>> {
        history::intervals(&self.read()?, from_ms, to_ms)
    }

    /// Usage inside `[from_ms, to_ms)` grouped `by`, from one snapshot of the holder intervals
    /// and the hourly totals rolled up out of older ones (see [`crate::usage::usage_with_hours`]).
    pub fn usage(&self, from_ms: u64, to_ms: u64, by: UsageBy) -> Result<Usage> {
        let txn = self.read()?;
        let intervals = history::intervals(&txn, from_ms, to_ms)?;
        let hours = history::hour_totals(&txn, from_ms, to_ms)?;
        Ok(usage::usage_with_hours(
            &intervals, &hours, from_ms, to_ms, by,
        ))
    }

    /// The time now by the ledger's clock (unix milliseconds).
    pub fn now_ms(&self) -> u64 {
        (self.inner.clock)()
    }

    /// The time (unix milliseconds, by the ledger's clock) before which ended holder intervals
    /// are rolled up into hourly totals: [`Ledger::holder_intervals`], the grouping by claim and
    /// [`Ledger::device_history`] no longer list them.
    pub fn history_rolled_up_before(&self) -> u64 {
        (self.inner.clock)().saturating_sub(self.inner.rollup_after_ms)
    }

    /// The holders and events of `device` on `node` inside `[from_ms, to_ms)`, oldest first;
    /// `None` when the ledger has no history of the device at all.
    pub fn device_history(
        &self,
        node: &str,
        device: &str,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Option<DeviceHistory>> {
        history::device_history(&self.read()?, node, device, from_ms, to_ms)
    }

    /// Device totals and per attribute value, with claim and pending counts.
    pub fn utilisation(&self) -> Result<Utilisation> {
        views::utilisation(&self.read()?)
    }

    /// [`Ledger::utilisation`] and [`Ledger::nodes`] from one snapshot and one pass over the
    /// devices (what a metrics refresh reads).
    pub fn utilisation_and_nodes(&self) -> Result<(Utilisation, Vec<NodeSummary>)> {
        views::utilisation_and_nodes(&self.read()?)
    }

    /// Group-commit statistics.
    pub fn commit_stats(&self) -> CommitStats {
        self.inner.stats.snapshot()
    }

    /// Checks every invariant of the file and that the writer's in-memory inventory agrees with
    /// it. Problems are listed in the report; `Err` only when the check itself cannot run.
    pub fn verify(&self) -> Result<VerifyReport> {
        // A read job runs between batches, so the snapshot it opens is the last commit, the one
        // the in-memory inventory describes; it commits nothing, so no commit guard applies.
        let db = self.inner.db.clone();
        let memory = self.inner.writer.read(move |state| {
            let txn = db.begin_read().map_err(LedgerError::storage)?;
            verify::inventory_agrees(&txn, &state.inventory)
        })?;
        let mut report =
            verify::verify_snapshot(&self.read()?, &self.inner.path, &self.inner.driver_name)?;
        report.problems.extend(memory);
        Ok(report)
    }

    /// Writes a consistent copy of the ledger (one read snapshot) to a new file at `to`.
    pub fn backup(&self, to: impl AsRef<Path>) -> Result<()> {
        let to = to.as_ref();
        let failed = |reason: String| LedgerError::Backup {
            path: to.to_path_buf(),
            reason,
        };
        if to.exists() {
            return Err(failed("destination exists".to_owned()));
        }
        let snapshot = self.read()?;
        let copy = Database::create(to).map_err(|e| failed(e.to_string()))?;
        let txn = copy.begin_write().map_err(|e| failed(e.to_string()))?;
        dra_migrations::copy_current_tables(&snapshot, &txn).map_err(|e| failed(e.to_string()))?;
        txn.commit().map_err(|e| failed(e.to_string()))?;
        Ok(())
    }
}
