//! The process endpoints: `GET /healthz`, `GET /readyz` and `GET /metrics`, always answered by
//! the replica reached (never forwarded to the leader).
//!
//! Handlers over [`AppState`]; must not depend on the router.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::error_response::{ErrorBody, ErrorResponse};
use crate::metrics::TEXT_FORMAT;
use crate::state::AppState;
use crate::v1::types::Status;

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
    let waiting = state.readiness().waiting_for();
    if waiting.is_empty() {
        let status = if state.readiness().is_standby() {
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
    state.metrics().set_ready(state.readiness().is_ready());
    state.metrics().set_leader(!state.readiness().is_standby());
    if let Some(source) = state.queue_depth() {
        state.metrics().set_workqueue_depth(source());
    }
    let capacity = state.capacity().view();
    let by_model = capacity
        .shared_utilisation()
        .map(|u| u.by_model)
        .unwrap_or_default();
    state
        .metrics()
        .set_capacity(&by_model, &capacity.placement_counters());
    if let Ok(ledger) = state.ledger() {
        let metrics = state.metrics().clone();
        let refreshed = tokio::task::spawn_blocking(move || metrics.refresh_from_ledger(&ledger))
            .await
            .map_err(|error| ErrorResponse::Internal(crate::Error::Task(error)))?;
        if let Err(error) = refreshed {
            // Stale gauges are better than no metrics at all: log and serve the rest.
            tracing::warn!(%error, "Failed to refresh ledger gauges");
        }
        if let Ok(idle) = state.idle_claims() {
            let listed = state
                .ledger_call(move |ledger| crate::v1::idle::idle_views(&idle, ledger, 0))
                .await;
            match listed {
                Ok(items) => state.metrics().set_idle(
                    &items
                        .iter()
                        .map(|item| (item.idle_seconds, item.devices.len()))
                        .collect::<Vec<_>>(),
                ),
                Err(error) => tracing::warn!(%error, "Failed to refresh the idle gauge"),
            }
        }
    }
    let text = state
        .metrics()
        .encode()
        .map_err(|error| ErrorResponse::Internal(error.into()))?;
    Ok(([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response())
}
