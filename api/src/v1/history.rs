//! The history handlers: `GET /v1/usage` (device usage inside a window, grouped) and
//! `GET /v1/nodes/{node}/devices/{device}/history` (a device's holders and events). Windows are
//! RFC 3339 times, the last 24 hours by default; the usage itself is computed by
//! `dra_allocator::usage` from the ledger's holder intervals and, for history older than the
//! rollup age, its hourly totals (both answers say from when on: `rolledUpBefore`). No token
//! needed.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::Json;
use dra_allocator::usage::UsageBy;
use serde::Deserialize;
use utoipa::IntoParams;

use super::read::{query, segments};
use super::types::{DeviceHistoryView, UsageView};
use crate::error_response::{ErrorBody, ErrorResponse};
use crate::state::AppState;

/// The default window: the last 24 hours.
const DEFAULT_WINDOW_MS: u64 = 24 * 3600 * 1000;

/// Query of both history endpoints: the window.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WindowQuery {
    /// The window's start, RFC 3339 (default: 24 hours before `to`).
    from: Option<String>,
    /// The window's end, excluded, RFC 3339 (default: now).
    to: Option<String>,
}

/// Query of `GET /v1/usage`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// The window's start, RFC 3339 (default: 24 hours before `to`).
    from: Option<String>,
    /// The window's end, excluded, RFC 3339 (default: now).
    to: Option<String>,
    /// The grouping: `namespace` (default), `node`, `model` or `claim`.
    by: Option<String>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// An RFC 3339 time as unix milliseconds; 400 naming the parameter otherwise.
fn parse_time(name: &str, text: &str) -> Result<u64, ErrorResponse> {
    let bad = |reason: String| {
        ErrorResponse::BadRequest(format!(
            "{name} must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {text:?}: {reason}"
        ))
    };
    let time = chrono::DateTime::parse_from_rfc3339(text).map_err(|e| bad(e.to_string()))?;
    u64::try_from(time.timestamp_millis()).map_err(|_| bad("before 1970".to_owned()))
}

/// The window `[from, to)` in unix milliseconds: given times, or the last 24 hours; 400 when a
/// time does not parse or `from` is not before `to`.
fn window(from: Option<&str>, to: Option<&str>) -> Result<(u64, u64), ErrorResponse> {
    let to = match to.filter(|t| !t.is_empty()) {
        Some(text) => parse_time("to", text)?,
        None => now_ms(),
    };
    let from = match from.filter(|t| !t.is_empty()) {
        Some(text) => parse_time("from", text)?,
        None => to.saturating_sub(DEFAULT_WINDOW_MS),
    };
    if from >= to {
        return Err(ErrorResponse::BadRequest(
            "from must be before to".to_owned(),
        ));
    }
    Ok((from, to))
}

/// Device usage inside a window: device-seconds, claims and the peak of devices held at once
/// per namespace, node, model or claim, from the ledger's holder intervals clipped to the
/// window (a share counts with its fraction where the allocation records one). Intervals that
/// ended before `rolledUpBefore` count from hourly totals, by whole hours, and not for
/// `by=claim`.
#[utoipa::path(get, path = "/v1/usage", tag = "ledger",
    params(UsageQuery),
    responses(
        (status = 200, description = "Usage by group, with the total", body = UsageView),
        (status = 400, description = "A time that is not RFC 3339, `from` not before `to`, or an unknown `by`", body = ErrorBody),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn usage(
    State(state): State<AppState>,
    parsed: Result<Query<UsageQuery>, QueryRejection>,
) -> Result<Json<UsageView>, ErrorResponse> {
    let q = query(parsed)?;
    let by_text = q.by.filter(|b| !b.is_empty());
    let by = match by_text.as_deref() {
        None => UsageBy::Namespace,
        Some(text) => text
            .parse::<UsageBy>()
            .map_err(|error| ErrorResponse::BadRequest(format!("by: {error}")))?,
    };
    let (from, to) = window(q.from.as_deref(), q.to.as_deref())?;
    let (computed, rolled_up_before) = state
        .ledger_call(move |ledger| {
            Ok((
                ledger.usage(from, to, by)?,
                ledger.history_rolled_up_before(),
            ))
        })
        .await?;
    Ok(Json(UsageView {
        from: super::types::rfc3339(from),
        to: super::types::rfc3339(to),
        by: by_text.unwrap_or_else(|| "namespace".to_owned()),
        rows: computed.rows.into_iter().map(Into::into).collect(),
        total: computed.total.into(),
        rolled_up_before: super::types::rfc3339(rolled_up_before),
    }))
}

/// The holders of a device whose interval overlaps the window and the device's events inside
/// it (cordon, uncordon, health, published, missing, restored, removed), each oldest first.
/// Holders that ended before `rolledUpBefore` are rolled up into hourly usage totals and not
/// listed.
#[utoipa::path(get, path = "/v1/nodes/{node}/devices/{device}/history", tag = "ledger",
    params(
        ("node" = String, Path, description = "Node name"),
        ("device" = String, Path, description = "Device name"),
        WindowQuery,
    ),
    responses(
        (status = 200, description = "Holders and events, oldest first", body = DeviceHistoryView),
        (status = 400, description = "A time that is not RFC 3339, or `from` not before `to`", body = ErrorBody),
        (status = 404, description = "The ledger has no history of this device", body = ErrorBody),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn device_history(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    parsed: Result<Query<WindowQuery>, QueryRejection>,
) -> Result<Json<DeviceHistoryView>, ErrorResponse> {
    let (node, device) = segments(path)?;
    let q = query(parsed)?;
    let (from, to) = window(q.from.as_deref(), q.to.as_deref())?;
    let (n, d) = (node.clone(), device.clone());
    let (history, rolled_up_before) = state
        .ledger_call(move |ledger| {
            Ok((
                ledger.device_history(&n, &d, from, to)?,
                ledger.history_rolled_up_before(),
            ))
        })
        .await?;
    let history = history.ok_or_else(|| {
        ErrorResponse::UnknownObject(format!(
            "device {device} of node {node} has no history in the ledger"
        ))
    })?;
    Ok(Json(DeviceHistoryView::new(
        history,
        super::types::rfc3339(rolled_up_before),
    )))
}
