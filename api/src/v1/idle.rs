//! `GET /v1/idle?for=10m`: the allocated claims that no consumer has used for longer than `for`
//! (default 10 minutes), oldest first, from the process's [`IdleClaims`] joined with the
//! ledger's allocations (node, devices, namespace and name). A claim the ledger does not hold
//! (another driver's) is left out. No token needed.

use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;
use dra_allocator::idle::IdleClaims;
use serde::Deserialize;
use utoipa::IntoParams;

use super::read::query;
use super::types::{rfc3339, IdleClaimView, IdleView};
use crate::error_response::{ErrorBody, ErrorResponse};
use crate::state::AppState;

/// The default threshold: 10 minutes.
pub const DEFAULT_FOR: Duration = Duration::from_secs(600);

/// Query of `GET /v1/idle`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IdleQuery {
    /// List claims idle for longer than this: a duration such as `90s`, `10m` or `1h30m`, or a
    /// number of seconds (default `10m`).
    #[serde(rename = "for")]
    #[param(rename = "for")]
    idle_for: Option<String>,
}

/// A duration in the grammar of the command-line flags: a bare number of seconds, or
/// `humantime`'s (`500ms`, `90s`, `5m`, `1h30m`); 400 naming `for` otherwise.
fn parse_for(text: &str) -> Result<Duration, ErrorResponse> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text).map_err(|error| {
        ErrorResponse::BadRequest(format!(
            "for must be a duration such as 90s, 10m or 1h30m, got {text:?}: {error}"
        ))
    })
}

/// The claims idle for longer than `for_ms` at the ledger's time, oldest first, with their
/// allocations (the answer of `GET /v1/idle`, and what the idle gauge counts).
pub(crate) fn idle_views(
    idle: &IdleClaims,
    ledger: &dra_allocator::ledger::Ledger,
    for_ms: u64,
) -> Result<Vec<IdleClaimView>, dra_allocator::ledger::LedgerError> {
    let now_ms = ledger.now_ms();
    let mut items = Vec::new();
    for claim in idle.idle_for(for_ms, now_ms) {
        let Some(allocation) = ledger.allocation(&claim.uid)? else {
            continue;
        };
        items.push(IdleClaimView {
            uid: claim.uid,
            namespace: allocation.claim.namespace,
            name: allocation.claim.name,
            node: allocation.node,
            devices: allocation.devices,
            idle_since: rfc3339(claim.since_ms),
            idle_seconds: now_ms.saturating_sub(claim.since_ms) / 1000,
        });
    }
    Ok(items)
}

/// The allocated claims that no consumer has used for longer than `for`: `status.reservedFor`
/// empty (Kubernetes removes the entries of pods that finished or are gone), with node,
/// devices and since when, oldest first. `idleSince` is kept in memory: after a restart (or a
/// change of leader) an unused claim counts as idle from when the new process first saw it.
#[utoipa::path(get, path = "/v1/idle", tag = "ledger",
    params(IdleQuery),
    responses(
        (status = 200, description = "The idle claims, oldest first", body = IdleView),
        (status = 400, description = "`for` is not a duration", body = ErrorBody),
        (status = 503, description = "Ledger not open or no claim observer running, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn idle(
    State(state): State<AppState>,
    parsed: Result<Query<IdleQuery>, QueryRejection>,
) -> Result<Json<IdleView>, ErrorResponse> {
    let q = query(parsed)?;
    let threshold = match q.idle_for.as_deref().filter(|t| !t.is_empty()) {
        Some(text) => parse_for(text)?,
        None => DEFAULT_FOR,
    };
    let for_ms = u64::try_from(threshold.as_millis()).unwrap_or(u64::MAX);
    let tracker = state.idle_claims()?;
    let items = state
        .ledger_call(move |ledger| idle_views(&tracker, ledger, for_ms))
        .await?;
    Ok(Json(IdleView {
        for_seconds: threshold.as_secs(),
        items,
    }))
}
