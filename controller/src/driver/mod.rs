//! The ledger-backed resource driver: implements [`dra_framework::Driver`] on top of the
//! `dra-allocator` ledger.
//!
//! - parameters: `parametersRef` of classes and claims resolved to the `dra-ledger.io` objects
//!   and converted by [`crate::params`] (errors name the field);
//! - allocation: every claim of one pod on the selected node committed in one ledger
//!   transaction; immediate claims placed by the class policy; results in the format of
//!   [`handle`];
//! - unsuitable nodes: the gang check over the pod's pending claims against the ledger's
//!   inventory (other pods' pending allocations count as taken; no soft reservations are made),
//!   with a Warning event on the pod that says why when no node fits;
//! - idle allocations: every claim the framework's informer delivers, as allocated and
//!   reserved or not, into the [`IdleClaims`] that `GET /v1/idle` reads;
//! - background: the ResourceSlice watch that keeps the ledger's inventory, and the periodic
//!   reconcile of the ledger with the claims of the cluster ([`reconcile`]).
//!
//! The ledger is blocking; every call goes through `tokio::task::spawn_blocking`, counted by
//! the `keeper` (which the v1 mirror holds too, with the readiness flags, the observer and the
//! inventory write). Cluster access
//! goes through [`DriverCluster`] so that the logic runs against an in-memory cluster in tests.
//! Must not depend on the framework's internals (only its public `Driver` interface and types)
//! nor on prometheus (metrics go through [`DriverObserver`]).

mod allocate;
mod background;
mod cluster;
mod error;
pub mod handle;
pub mod inventory;
mod keeper;
mod listed_claim;
mod observer;
mod param_cache;
mod parameters;
pub mod reconcile;
mod state;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod unsuitable;

use std::sync::Arc;
use std::time::Duration;

use dra_allocator::idle::IdleClaims;
use dra_allocator::ledger::Ledger;
use dra_allocator::model::EffectiveRequest;

pub use background::{run_background, sync_inventory};
pub use cluster::{DriverCluster, KubeCluster};
pub use error::{DriverError, Result};
pub(crate) use keeper::LedgerKeeper;
pub use observer::{
    AllocationMode, AllocationOutcome, DeallocationOutcome, DriftKind, DriverObserver, NoopObserver,
};
pub use reconcile::DriftReport;
pub use state::DriverReadiness;
pub use unsuitable::explain_unsuitable;

use state::DriverState;

/// Settings of the driver.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// The DRA driver name (`ResourceClass.driverName`, `ResourceSlice.driverName`).
    pub driver_name: String,
    /// How long a pending intent may wait for its claim to show the allocation before a
    /// reconcile releases it (2 min).
    pub grace_period: Duration,
    /// How often the ledger is reconciled with the cluster (5 min).
    pub reconcile_interval: Duration,
    /// How long `allocate` and `unsuitable_nodes` wait for readiness before failing (30 s).
    pub ready_timeout: Duration,
    /// How many node reasons the "no node fits" event on a pod lists before "and N more" (5).
    pub event_reasons: usize,
}

impl DriverConfig {
    /// The defaults for driver `driver_name`.
    pub fn new(driver_name: impl Into<String>) -> Self {
        DriverConfig {
            driver_name: driver_name.into(),
            grace_period: Duration::from_secs(120),
            reconcile_interval: Duration::from_secs(300),
            ready_timeout: Duration::from_secs(30),
            event_reasons: 5,
        }
    }
}

/// The validated parameters of one claim: its request with the class applied, and whether
/// several pods may use it at once (the allocation result's `shareable`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimParameters {
    /// What the fitting logic works on.
    pub request: EffectiveRequest,
    /// `spec.shareable` of the claim parameters.
    pub shareable: bool,
}

/// The ledger-backed driver. Share it as `Arc<LedgerDriver>` between the framework's
/// `Controller`, [`run_background`] and the admin API.
pub struct LedgerDriver {
    /// The ledger, its calls in flight ([`LedgerDriver::quiesce`] waits for them), the
    /// readiness flags and the observer.
    keeper: LedgerKeeper,
    cluster: Arc<dyn DriverCluster>,
    config: DriverConfig,
    state: DriverState,
    /// Held for writing by a reconcile (so reconciles never overlap) and for reading by every
    /// release of a deallocated claim, so that a release cannot run between a reconcile's claim
    /// list and its import of a claim the list showed allocated.
    reconcile_lock: tokio::sync::RwLock<()>,
    takeover: std::sync::atomic::AtomicBool,
    idle: Arc<IdleClaims>,
}

impl std::fmt::Debug for LedgerDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.keeper.fmt_holder(f, "LedgerDriver", &self.config)
    }
}

impl LedgerDriver {
    /// A driver over `ledger` that talks to the cluster through `client`.
    pub fn new(ledger: Ledger, client: kube::Client, config: DriverConfig) -> Self {
        let cluster = Arc::new(KubeCluster::new(client, &config.driver_name));
        Self::with_cluster(ledger, cluster, config)
    }

    /// A driver over `ledger` with the given cluster access (tests, embedding).
    pub fn with_cluster(
        ledger: Ledger,
        cluster: Arc<dyn DriverCluster>,
        config: DriverConfig,
    ) -> Self {
        LedgerDriver {
            keeper: LedgerKeeper::new(ledger),
            cluster,
            config,
            state: DriverState::default(),
            reconcile_lock: tokio::sync::RwLock::new(()),
            takeover: std::sync::atomic::AtomicBool::new(false),
            idle: Arc::default(),
        }
    }

    /// Reports metric-relevant facts to `observer` instead of nowhere.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn DriverObserver>) -> Self {
        self.keeper.set_observer(observer);
        self
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        self.keeper.ledger()
    }

    /// The claims allocated without a consumer, as the claim informer delivers them.
    pub fn idle_claims(&self) -> Arc<IdleClaims> {
        self.idle.clone()
    }

    /// The settings.
    pub fn config(&self) -> &DriverConfig {
        &self.config
    }

    /// Declares that another leader may have allocated since this ledger was last written (the
    /// leader lease was taken over, not continued): no allocation of a previous process can still
    /// be in flight, so the next reconcile judges every pending intent by the cluster alone
    /// instead of leaving young ones for later. Cleared by the next successful reconcile.
    pub fn mark_takeover(&self) {
        self.takeover
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The readiness flags (inventory synced, initial reconcile done) for `/readyz`.
    pub fn readiness(&self) -> DriverReadiness {
        self.keeper.readiness().clone()
    }

    /// Waits until no ledger call is in flight and refuses new ones: after this, the only
    /// handles on the ledger file are the driver's own and its callers' (a ledger call whose
    /// caller was dropped at shutdown still runs to its end in its blocking thread).
    pub async fn quiesce(&self) {
        self.keeper.quiesce().await;
    }

    /// Waits until the driver is ready, at most `ready_timeout`.
    async fn wait_ready(&self) -> Result<()> {
        tokio::time::timeout(self.config.ready_timeout, self.keeper.readiness().wait())
            .await
            .map_err(|_| DriverError::NotReady)
    }
}
