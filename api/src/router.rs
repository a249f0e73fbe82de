//! The admin HTTP server's routes.
//!
//! Endpoints:
//! - `GET /healthz`: 200 while the process serves requests.
//! - `GET /readyz`: 200 once the ledger is open, the caches are synced and the initial reconcile
//!   is done; 503 with a JSON error naming what is still missing before that.
//! - `GET /metrics`: every metric of [`crate::metrics`] in the Prometheus text format; the ledger
//!   gauges and the work queue depth are refreshed on each scrape.
//!
//! Any other path is a JSON 404. Errors are `{"error": {"code": "...", "message": "..."}}`; 4xx
//! messages say what was wrong, 5xx messages are generic while the real error is logged.
//! Depends on the ledger only through its read views.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use dra_allocator::ledger::Ledger;
use serde_json::json;

use crate::metrics::{Metrics, TEXT_FORMAT};
use crate::readiness::Readiness;

/// A source of the work queue depth, read on each scrape.
pub type DepthSource = Arc<dyn Fn() -> usize + Send + Sync>;

/// What the handlers share. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    metrics: Arc<Metrics>,
    readiness: Readiness,
    ledger: Option<Ledger>,
    queue_depth: Option<DepthSource>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("readiness", &self.readiness)
            .field("ledger", &self.ledger)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// State with the given metrics and readiness flags, without a ledger.
    pub fn new(metrics: Arc<Metrics>, readiness: Readiness) -> Self {
        AppState {
            metrics,
            readiness,
            ledger: None,
            queue_depth: None,
        }
    }

    /// Refreshes the ledger gauges from `ledger` on every scrape.
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

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The readiness flags.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }
}

/// An error answered as JSON `{"error": {"code", "message"}}` with its status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The process is not ready yet (503).
    #[error("not ready: waiting for {}", waiting.join(", "))]
    NotReady {
        /// What is still missing.
        waiting: Vec<&'static str>,
    },
    /// No route matches the path (404).
    #[error("no such endpoint: {path}")]
    NotFound {
        /// The requested path.
        path: String,
    },
    /// Something failed inside the server (500); the client sees a generic message.
    #[error("internal error")]
    Internal(#[source] crate::Error),
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::NotReady { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The fixed `code` of the JSON body.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::NotReady { .. } => "not_ready",
            ApiError::NotFound { .. } => "not_found",
            ApiError::Internal(_) => "internal",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(source) = &self {
            tracing::error!(error = %source, "Admin API request failed");
        }
        let body = json!({"error": {"code": self.code(), "message": self.to_string()}});
        (self.status(), Json(body)).into_response()
    }
}

/// The admin router over `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(state)
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let waiting = state.readiness.waiting_for();
    if waiting.is_empty() {
        Ok(Json(json!({"status": "ready"})))
    } else {
        Err(ApiError::NotReady { waiting })
    }
}

async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    state.metrics.set_ready(state.readiness.is_ready());
    if let Some(source) = &state.queue_depth {
        state.metrics.set_workqueue_depth(source());
    }
    if let Some(ledger) = state.ledger.clone() {
        let metrics = state.metrics.clone();
        let refreshed = tokio::task::spawn_blocking(move || metrics.refresh_from_ledger(&ledger))
            .await
            .map_err(|error| ApiError::Internal(crate::Error::Task(error.to_string())))?;
        if let Err(error) = refreshed {
            // Stale gauges are better than no metrics at all: log and serve the rest.
            tracing::warn!(%error, "Failed to refresh ledger gauges");
        }
    }
    let text = state.metrics.encode().map_err(ApiError::Internal)?;
    Ok(([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response())
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound {
        path: uri.path().to_owned(),
    }
}
