//! What the admin API's handlers share: [`AppState`], built by the process that serves the
//! API (its metrics, readiness flags, ledger, token, reconciler, leadership view and capacity) and handed
//! to [`crate::router()`].
//!
//! A leaf of the crate: the handlers, the middleware and the router read it; it must not depend
//! on any of them (only on the values it holds).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;
use dra_allocator::idle::IdleClaims;
use dra_allocator::ledger::{Ledger, LedgerError};

use crate::auth::AdminToken;
use crate::capacity::SharedCapacity;
use crate::cordon::ClusterCordon;
use crate::error_response::ErrorResponse;
use crate::forward::proxy::Forwarder;
use crate::forward::serving::Leadership;
use crate::limits;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::reconciler::Reconciler;

/// A source of the work queue depth, read on each scrape.
pub type DepthSource = Arc<dyn Fn() -> usize + Send + Sync>;

/// The replica name of a state that was given none.
pub const DEFAULT_REPLICA: &str = "dra-ledger";

/// What the handlers share. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    metrics: Arc<Metrics>,
    readiness: Readiness,
    ledger: Option<Ledger>,
    queue_depth: Option<DepthSource>,
    admin_token: Option<AdminToken>,
    reconciler: Option<Arc<dyn Reconciler>>,
    reconcile_lock: Arc<tokio::sync::Mutex<()>>,
    request_timeout: Duration,
    replica: String,
    leadership: Option<Arc<dyn Leadership>>,
    forwarder: Forwarder,
    cordon: Option<Arc<dyn ClusterCordon>>,
    idle: Option<Arc<IdleClaims>>,
    capacity: SharedCapacity,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("readiness", &self.readiness)
            .field("ledger", &self.ledger)
            .field("admin_token", &self.admin_token)
            .field("reconciler", &self.reconciler.is_some())
            .field("replica", &self.replica)
            .field("leadership", &self.leadership.is_some())
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// State with the given metrics and readiness flags, without a ledger, token or reconciler.
    pub fn new(metrics: Arc<Metrics>, readiness: Readiness) -> Self {
        AppState {
            metrics,
            readiness,
            ledger: None,
            queue_depth: None,
            admin_token: None,
            reconciler: None,
            reconcile_lock: Arc::default(),
            request_timeout: limits::REQUEST_TIMEOUT,
            replica: DEFAULT_REPLICA.to_owned(),
            leadership: None,
            forwarder: Forwarder::default(),
            cordon: None,
            idle: None,
            capacity: SharedCapacity::default(),
        }
    }

    /// Names this replica in every answer (`Dra-Ledger-Replica`) and in the `continue` tokens
    /// of its ledger (default [`DEFAULT_REPLICA`]).
    #[must_use]
    pub fn with_replica(mut self, name: impl Into<String>) -> Self {
        self.replica = name.into();
        self
    }

    /// Answers `/v1` from the leader's ledger as `leadership` tells: locally while this
    /// replica leads, else forwarded to the leader. Without it, this replica's ledger answers.
    #[must_use]
    pub fn with_leadership(mut self, leadership: Arc<dyn Leadership>) -> Self {
        self.leadership = Some(leadership);
        self
    }

    /// Serves the `/v1` views from `ledger` and refreshes its gauges on every scrape.
    #[must_use]
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Reads the work queue depth from `source` on every scrape.
    #[must_use]
    pub fn with_queue_depth(mut self, source: DepthSource) -> Self {
        self.queue_depth = Some(source);
        self
    }

    /// Enables the mutating endpoints and the backup for requests carrying `token`.
    #[must_use]
    pub fn with_admin_token(mut self, token: AdminToken) -> Self {
        self.admin_token = Some(token);
        self
    }

    /// Runs `POST /v1/reconcile` through `reconciler`.
    #[must_use]
    pub fn with_reconciler(mut self, reconciler: Arc<dyn Reconciler>) -> Self {
        self.reconciler = Some(reconciler);
        self
    }

    /// Sets the time limit of requests other than the backup (default [`REQUEST_TIMEOUT`](limits::REQUEST_TIMEOUT)).
    #[must_use]
    pub fn with_request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = limit;
        self
    }

    /// Writes cordon and uncordon to the cluster through `cordon` before the ledger records
    /// them: where the ledger does not allocate (the kube-scheduler does, on
    /// `resource.k8s.io/v1`), a cordon only in the ledger would keep nothing off a device.
    #[must_use]
    pub fn with_cluster_cordon(mut self, cordon: Arc<dyn ClusterCordon>) -> Self {
        self.cordon = Some(cordon);
        self
    }

    /// Answers `GET /v1/idle` and the idle gauge from `idle`, which the claim observer of
    /// this process feeds.
    #[must_use]
    pub fn with_idle_claims(mut self, idle: Arc<IdleClaims>) -> Self {
        self.idle = Some(idle);
        self
    }

    /// Shows the partitions and shares `capacity` is given (by the `v1` mirror) beside the
    /// ledger's counts; without it, the answers leave capacity out.
    #[must_use]
    pub fn with_capacity(mut self, capacity: SharedCapacity) -> Self {
        self.capacity = capacity;
        self
    }

    /// The capacity view, empty unless a publisher fills it.
    pub fn capacity(&self) -> &SharedCapacity {
        &self.capacity
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The readiness flags.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// This replica's name.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    pub(crate) fn leadership(&self) -> Option<&Arc<dyn Leadership>> {
        self.leadership.as_ref()
    }

    pub(crate) fn forwarder(&self) -> &Forwarder {
        &self.forwarder
    }

    /// The time limit of a request for `path` (longer for the backup).
    pub(crate) fn time_limit_of(&self, path: &str) -> Duration {
        limits::time_limit_of(path, self.request_timeout)
    }

    /// The source of the work queue depth, if any.
    pub(crate) fn queue_depth(&self) -> Option<&DepthSource> {
        self.queue_depth.as_ref()
    }

    pub(crate) fn reconciler(&self) -> Option<&Arc<dyn Reconciler>> {
        self.reconciler.as_ref()
    }

    /// The idle claims, or 503 while no claim observer feeds them.
    pub(crate) fn idle_claims(&self) -> Result<Arc<IdleClaims>, ErrorResponse> {
        self.idle.clone().ok_or(ErrorResponse::NotReady {
            waiting: vec!["claim observer"],
        })
    }

    pub(crate) fn cluster_cordon(&self) -> Option<&Arc<dyn ClusterCordon>> {
        self.cordon.as_ref()
    }

    pub(crate) fn reconcile_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.reconcile_lock
    }

    /// The ledger, or 503 while there is none.
    pub(crate) fn ledger(&self) -> Result<Ledger, ErrorResponse> {
        self.ledger.clone().ok_or(ErrorResponse::NotReady {
            waiting: vec!["ledger open"],
        })
    }

    /// Runs a blocking ledger call on the blocking pool, mapping its error to an answer.
    pub(crate) async fn ledger_call<T, F>(&self, call: F) -> Result<T, ErrorResponse>
    where
        T: Send + 'static,
        F: FnOnce(&Ledger) -> Result<T, LedgerError> + Send + 'static,
    {
        let ledger = self.ledger()?;
        tokio::task::spawn_blocking(move || call(&ledger))
            .await
            .map_err(|error| ErrorResponse::Internal(crate::Error::Task(error)))?
            .map_err(ErrorResponse::from_ledger)
    }
}

/// The admin token the [`crate::auth::Authorized`] extractor checks a request against.
impl FromRef<AppState> for Option<AdminToken> {
    fn from_ref(state: &AppState) -> Self {
        state.admin_token.clone()
    }
}
