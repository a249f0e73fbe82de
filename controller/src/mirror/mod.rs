//! The observer of `dra-ledger run` on `resource.k8s.io/v1` clusters (Kubernetes 1.34+), where
//! the kube-scheduler allocates from the ResourceSlices the node agents publish: [`Mirror`]
//! allocates nothing and mirrors the cluster into the ledger, so that the audit log, the
//! utilisation, the admin API, the metrics and the dashboards work as on 1.30.
//!
//! - inventory: this driver's v1 ResourceSlices, per node, into `Ledger::set_inventory`;
//! - allocations: every claim whose `status.allocation` has results of this driver into
//!   `Ledger::import`, keyed by claim UID (node from the results' pool, sharing from our opaque
//!   configuration); a changed allocation replaces the recorded one, an identical one is left
//!   alone (no audit entry); a claim deallocated or deleted is released;
//! - admin access: the results with `adminAccess: true` into `Ledger::record_admin_access`,
//!   apart from the allocation (they take no device from anyone), released with the claim
//!   ([`admin_access`] decides, `admin_sync` calls the ledger);
//! - reconcile: at start from the first complete listing (which makes the process ready),
//!   every `reconcile_interval` and on `POST /v1/reconcile` against a fresh claim list, with
//!   the differences counted as drift ([`mapping::plan`]), plus the allocated devices no slice
//!   publishes (`unpublished_device`);
//! - explanations: a claim of our device classes that stays unallocated gets a Warning event
//!   saying what the ledger sees (`explain`), again only when that text changes.
//!
//! - health: the `<driver>/unhealthy` taints of our slices into `Ledger::set_node_health`
//!   ([`health`]);
//! - cordon: a `DeviceTaintRule` per cordoned device (`cordon`).
//! - idle allocations: every claim the watch delivers, as allocated and reserved or not, into
//!   the [`IdleClaims`] that `GET /v1/idle` reads (`watch`).
//!
//! - partitions and shares: the counter sets and multi-allocation devices of our slices and the
//!   shares in claims' results, as the ledger counts them ([`parts`]), and the capacity view
//!   built from them after every change for the admin API ([`Mirror::with_capacity`]).
//!
//! [`mapping`], [`parts`] and `explain` are pure; `sync` does the ledger calls and the reconcile, `watch`
//! the watches and the loop. Must not depend on the `v1alpha2` framework: nothing here allocates.

pub mod admin_access;
mod admin_sync;
pub mod cordon;
pub mod explain;
pub mod health;
pub mod mapping;
pub mod parts;
mod sync;
mod watch;

use dra_runtime::events::EventRecorder;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use dra_allocator::idle::IdleClaims;
use dra_allocator::ledger::{DeviceHealth, Ledger};
use dra_allocator::model::Device;
use dra_api::SharedCapacity;
use dra_types::resource_v1::{ResourceClaim, ResourceSlice};
use kube::Client;

use crate::driver::{DriverObserver, DriverReadiness, LedgerKeeper};
use mapping::SliceInventory;

pub use explain::REASON as EXPLANATION_REASON;
pub use watch::run_mirror;

/// Settings of the mirror.
#[derive(Clone, Debug)]
pub struct MirrorConfig {
    /// The DRA driver name (`ResourceSlice.spec.driver`, the results' `driver`).
    pub driver_name: String,
    /// How often the ledger is reconciled against a fresh claim list (5 min).
    pub reconcile_interval: Duration,
    /// How long a claim of our classes stays unallocated before an event explains it (60 s).
    pub explain_after: Duration,
    /// How often unallocated claims are looked at for explanations (15 s).
    pub explain_interval: Duration,
}

impl MirrorConfig {
    /// The defaults for driver `driver_name`.
    pub fn new(driver_name: impl Into<String>) -> Self {
        MirrorConfig {
            driver_name: driver_name.into(),
            reconcile_interval: Duration::from_secs(300),
            explain_after: Duration::from_secs(60),
            explain_interval: Duration::from_secs(15),
        }
    }
}

/// What the watches delivered and what was written from it. Held (behind the mirror's lock) by
/// every change to the ledger, so that an event, a reconcile and an explanation pass never
/// interleave.
#[derive(Default)]
struct Cache {
    /// Our slices by name.
    slices: BTreeMap<String, ResourceSlice>,
    /// Every claim by UID.
    claims: BTreeMap<String, ResourceClaim>,
    /// The inventory of `slices`.
    inventory: SliceInventory,
    /// The devices last written per node.
    written: BTreeMap<String, Vec<Device>>,
    /// The unhealthy devices last written per node.
    health_written: BTreeMap<String, BTreeMap<String, DeviceHealth>>,
    /// The last problem logged per claim UID (logged again only when it changes).
    problems: HashMap<String, String>,
    /// The last explanation posted per claim UID.
    explained: HashMap<String, String>,
}

/// The v1 observer: the ledger it writes, the client it reads the cluster with, and what the
/// watches delivered. Share it as `Arc<Mirror>` between [`run_mirror`] and the admin API.
pub struct Mirror {
    /// The ledger, its calls in flight (see [`Mirror::quiesce`]), the readiness flags and the
    /// observer.
    keeper: LedgerKeeper,
    client: Client,
    recorder: EventRecorder,
    config: MirrorConfig,
    cache: tokio::sync::Mutex<Cache>,
    idle: Arc<IdleClaims>,
    capacity: Option<SharedCapacity>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.keeper.fmt_holder(f, "Mirror", &self.config)
    }
}

impl Mirror {
    /// A mirror into `ledger` of the cluster behind `client`.
    pub fn new(ledger: Ledger, client: Client, config: MirrorConfig) -> Self {
        Mirror {
            keeper: LedgerKeeper::new(ledger),
            recorder: EventRecorder::new(client.clone(), &config.driver_name),
            client,
            config,
            cache: tokio::sync::Mutex::default(),
            idle: Arc::default(),
            capacity: None,
        }
    }

    /// Reports drift and reconcile durations to `observer` instead of nowhere.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn DriverObserver>) -> Self {
        self.keeper.set_observer(observer);
        self
    }

    /// Publishes the capacity view (partitions, shares and who holds them) to `capacity` after
    /// every change, for the admin API.
    #[must_use]
    pub fn with_capacity(mut self, capacity: SharedCapacity) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// Publishes the capacity view of `cache`, if a handle was given.
    fn publish_capacity(&self, cache: &Cache) {
        if let Some(capacity) = &self.capacity {
            capacity.publish(parts::capacity_view(
                &self.config.driver_name,
                &cache.inventory,
                cache.claims.values(),
            ));
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        self.keeper.ledger()
    }

    /// The claims allocated without a consumer, as the claim watch sees them.
    pub fn idle_claims(&self) -> Arc<IdleClaims> {
        self.idle.clone()
    }

    /// The settings.
    pub fn config(&self) -> &MirrorConfig {
        &self.config
    }

    /// The readiness flags: `inventory_synced` once both watches have listed, `reconciled`
    /// once that first listing is mirrored into the ledger.
    pub fn readiness(&self) -> DriverReadiness {
        self.keeper.readiness().clone()
    }

    /// Waits until no ledger call is in flight and refuses new ones (a call whose caller was
    /// dropped at shutdown still runs to its end in its blocking thread).
    pub async fn quiesce(&self) {
        self.keeper.quiesce().await;
    }
}
