//! The JSON shapes of `GET /v1/usage` and `GET /v1/nodes/{node}/devices/{device}/history`:
//! times as RFC 3339 text (UTC, milliseconds), mapped from `dra_allocator::usage` and the
//! ledger's device history.

use dra_allocator::ledger::{DeviceEvent, DeviceHistory};
use dra_allocator::usage::{HolderInterval, UsageRow};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Unix milliseconds as RFC 3339 text in UTC with milliseconds, e.g. `2026-01-01T00:01:30.000Z`.
pub fn rfc3339(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || ms.to_string(),
            |time| time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
}

/// The usage of one group inside the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageRowView {
    /// The group: a namespace, node, model (`unknown` without one), `namespace/name` of a
    /// claim, or `total`.
    pub key: String,
    /// Device-seconds used inside the window; a share counts with its fraction.
    pub device_seconds: f64,
    /// Distinct claims that held a device of the group.
    pub claims: u64,
    /// The most devices the group held at one time.
    pub peak_devices: f64,
}

impl From<UsageRow> for UsageRowView {
    fn from(row: UsageRow) -> Self {
        UsageRowView {
            key: row.key,
            device_seconds: row.device_seconds,
            claims: row.claims,
            peak_devices: row.peak_devices,
        }
    }
}

/// `GET /v1/usage`: device usage inside `[from, to)` grouped `by`, with the total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageView {
    /// The window's start (RFC 3339).
    pub from: String,
    /// The window's end, excluded (RFC 3339).
    pub to: String,
    /// The grouping: `namespace`, `node`, `model` or `claim`.
    pub by: String,
    /// One row per group, by key.
    pub rows: Vec<UsageRowView>,
    /// All groups together (key `total`).
    pub total: UsageRowView,
    /// Holder intervals that ended before this time (RFC 3339) are kept as hourly totals per
    /// namespace, node and model: they count by whole hours (an hour counts when it starts inside
    /// the window), and `by=claim` does not see them.
    #[serde(rename = "rolledUpBefore")]
    pub rolled_up_before: String,
}

/// One claim holding the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HolderView {
    /// The claim UID.
    pub claim_uid: String,
    /// The claim namespace.
    pub namespace: String,
    /// The claim name.
    pub name: String,
    /// When the claim got the device (RFC 3339).
    pub from: String,
    /// When it gave the device back (RFC 3339); null while it holds it.
    pub to: Option<String>,
}

impl From<HolderInterval> for HolderView {
    fn from(interval: HolderInterval) -> Self {
        HolderView {
            claim_uid: interval.claim_uid,
            namespace: interval.namespace,
            name: interval.name,
            from: rfc3339(interval.from_ms),
            to: interval.to_ms.map(rfc3339),
        }
    }
}

/// Something that happened to the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeviceEventView {
    /// When (RFC 3339).
    pub time: String,
    /// `cordoned`, `uncordoned`, `unhealthy`, `healthy`, `added`, `missing`, `restored` or
    /// `removed`.
    pub kind: String,
    /// More about it (the reason of `unhealthy`), or empty.
    pub detail: String,
}

impl From<DeviceEvent> for DeviceEventView {
    fn from(event: DeviceEvent) -> Self {
        DeviceEventView {
            time: rfc3339(event.at_ms),
            kind: event.kind.as_str().to_owned(),
            detail: event.detail,
        }
    }
}

/// `GET /v1/nodes/{node}/devices/{device}/history`: the device's holders and events inside the
/// window, each oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeviceHistoryView {
    /// The holders whose interval overlaps the window, by start.
    pub holders: Vec<HolderView>,
    /// The events inside the window, by time.
    pub events: Vec<DeviceEventView>,
    /// Holders whose interval ended before this time (RFC 3339) are rolled up into hourly totals
    /// and no longer listed; events stay until the history retention.
    #[serde(rename = "rolledUpBefore")]
    pub rolled_up_before: String,
}

impl DeviceHistoryView {
    /// The view of `history`, whose holders that ended before `rolled_up_before` are rolled up.
    pub fn new(history: DeviceHistory, rolled_up_before: String) -> Self {
        DeviceHistoryView {
            holders: history.holders.into_iter().map(Into::into).collect(),
            events: history.events.into_iter().map(Into::into).collect(),
            rolled_up_before,
        }
    }
}
