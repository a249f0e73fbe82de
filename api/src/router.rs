//! The admin HTTP server: [`AppState`], [`router()`] and the process endpoints.
//!
//! The process endpoints `GET /healthz`, `GET /readyz` and `GET /metrics` are here, the ledger
//! API under `/v1` in [`crate::v1`]; `docs/admin-api.md` lists every route and what it answers.
//!
//! Any other path is a JSON 404, a known path with another method a JSON 405. Request bodies
//! are limited to [`BODY_LIMIT`] bytes and requests to a time limit (longer for the backup).
//! On a standby, `/v1` requests go to the leader ([`crate::forward`]). Depends on the ledger only
//! through its views and the cordon calls.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use dra_allocator::ledger::{Ledger, LedgerError};

use crate::auth::AdminToken;
use crate::error_response::{ErrorBody, ErrorResponse};
use crate::forward::proxy::Forwarder;
use crate::forward::Leadership;
use crate::metrics::{Metrics, TEXT_FORMAT};
use crate::readiness::Readiness;
use crate::reconciler::Reconciler;
use crate::v1::types::Status;

/// A source of the work queue depth, read on each scrape.
pub type DepthSource = Arc<dyn Fn() -> usize + Send + Sync>;

/// Largest accepted request body in bytes (64 KiB).
pub const BODY_LIMIT: usize = 64 * 1024;
/// Default time limit of a request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Time limit of `GET /v1/backup` until the copy starts streaming.
pub const BACKUP_TIMEOUT: Duration = Duration::from_secs(600);
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
    cordon_refusal: Option<String>,
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
            request_timeout: REQUEST_TIMEOUT,
            replica: DEFAULT_REPLICA.to_owned(),
            leadership: None,
            forwarder: Forwarder::default(),
            cordon_refusal: None,
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

    /// Sets the time limit of requests other than the backup (default [`REQUEST_TIMEOUT`]).
    #[must_use]
    pub fn with_request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = limit;
        self
    }

    /// Answers cordon and uncordon with 409 and `message` instead of changing the ledger: where
    /// the ledger does not allocate (the kube-scheduler does, on `resource.k8s.io/v1`), a cordon
    /// in it would keep nothing off a device.
    #[must_use]
    pub fn with_cordon_refusal(mut self, message: impl Into<String>) -> Self {
        self.cordon_refusal = Some(message.into());
        self
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
        if path == "/v1/backup" {
            BACKUP_TIMEOUT.max(self.request_timeout)
        } else {
            self.request_timeout
        }
    }

    pub(crate) fn admin_token(&self) -> Option<&AdminToken> {
        self.admin_token.as_ref()
    }

    pub(crate) fn reconciler(&self) -> Option<&Arc<dyn Reconciler>> {
        self.reconciler.as_ref()
    }

    pub(crate) fn cordon_refusal(&self) -> Option<&str> {
        self.cordon_refusal.as_deref()
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

/// The admin router over `state`: every route of [`crate::v1::openapi`], a JSON 404 for other
/// paths, the body limit and the time limits, all behind the forwarding of a standby's `/v1`
/// requests to the leader (which has its own time limits, [`crate::forward`]).
pub fn router(state: AppState) -> Router {
    let (routes, _document) = crate::v1::routes().split_for_parts();
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(state.clone(), time_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::forward::answer_from_leader,
        ))
        .with_state(state)
}

async fn time_limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limit = state.time_limit_of(request.uri().path());
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ErrorResponse::Timeout {
            seconds: limit.as_secs().max(1),
        }
        .into_response(),
    }
}

/// 200 while the process serves requests.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process is up", body = Status)))]
pub async fn healthz() -> Json<Status> {
    Json(Status {
        status: "ok".to_owned(),
    })
}

/// 200 once the ledger is open, the caches are synced and the initial reconcile is done.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready: `ready` (the active allocator) or `standby` (leader election: healthy, not holding the lease)", body = Status),
        (status = 503, description = "What is still missing", body = ErrorBody),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Status>, ErrorResponse> {
    let waiting = state.readiness.waiting_for();
    if waiting.is_empty() {
        let status = if state.readiness.is_standby() {
            "standby"
        } else {
            "ready"
        };
        Ok(Json(Status {
            status: status.to_owned(),
        }))
    } else {
        Err(ErrorResponse::NotReady { waiting })
    }
}

/// Every metric in the Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain", body = String)))]
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ErrorResponse> {
    state.metrics.set_ready(state.readiness.is_ready());
    state.metrics.set_leader(!state.readiness.is_standby());
    if let Some(source) = &state.queue_depth {
        state.metrics.set_workqueue_depth(source());
    }
    if let Some(ledger) = state.ledger.clone() {
        let metrics = state.metrics.clone();
        let refreshed = tokio::task::spawn_blocking(move || metrics.refresh_from_ledger(&ledger))
            .await
            .map_err(|error| ErrorResponse::Internal(crate::Error::Task(error)))?;
        if let Err(error) = refreshed {
            // Stale gauges are better than no metrics at all: log and serve the rest.
            tracing::warn!(%error, "Failed to refresh ledger gauges");
        }
    }
    let text = state
        .metrics
        .encode()
        .map_err(|error| ErrorResponse::Internal(error.into()))?;
    Ok(([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response())
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ErrorResponse {
    ErrorResponse::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

async fn not_found(uri: axum::http::Uri) -> ErrorResponse {
    ErrorResponse::NotFound {
        path: uri.path().to_owned(),
    }
}
