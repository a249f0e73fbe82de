//! The ledger's history (schema version 4): one holder interval per claim and device, opened when
//! the claim gets the device and closed when it gives it back, and the device's events (cordon,
//! uncordon, health changes, published, missing, restored, removed), written in the transaction
//! of the change they record. Closed intervals older than the rollup age become hourly totals
//! per namespace, node and model (schema version 5, `rollup`); events and hours older than the
//! history retention are pruned, all with the batch, a bounded number at a time.
//!
//! Owns the `history`, `history_devices` and `history_hours` tables: their records, the writes
//! inside the writer's transaction (fed by every audit entry, so no operation writes history on
//! its own), the rollup (`rollup`), the read views (`views`) and the verify check (`check`). The
//! usage computation over intervals and hours is [`crate::usage`]; must not be used by `fit` or
//! `model`.

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::records::AuditEvent;
use super::store::decoded;
use super::tables::{HistoryDeviceKey, HistorySeq, Record};
use super::writer::Tx;
use super::{LedgerError, Result};
use crate::usage::HolderInterval;

mod check;
mod rollup;
mod views;

pub(crate) use check::check;
pub(crate) use views::{device_history, hour_totals, intervals};

/// One history entry of a device (file format: variants are only ever added at the end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// The node.
    pub node: String,
    /// The device.
    pub device: String,
    /// A holder interval or an event.
    pub entry: HistoryEntry,
}

impl HistoryRecord {
    /// Whether the entry started (or, for an event, happened) before `at_ms`.
    pub(crate) fn started_before(&self, at_ms: u64) -> bool {
        span(&self.entry).0 < at_ms
    }
}

impl Record for HistoryRecord {
    const TYPE_NAME: &'static str = "dra_ledger::HistoryRecord@v1";
}

/// What a history entry records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HistoryEntry {
    /// A claim held the device from `from_ms` until `to_ms` (`None` while it holds it).
    Held {
        /// Claim UID.
        claim_uid: String,
        /// Claim namespace.
        namespace: String,
        /// Claim name.
        name: String,
        /// Unix milliseconds when the claim got the device.
        from_ms: u64,
        /// Unix milliseconds when it gave the device back; `None` while held.
        to_ms: Option<u64>,
        /// The fraction of the device held, in thousandths, where the allocation records one.
        share_permille: Option<u32>,
    },
    /// Something happened to the device.
    Event {
        /// Unix milliseconds.
        at_ms: u64,
        /// What happened.
        kind: DeviceEventKind,
        /// More about it (a health reason), or empty.
        detail: String,
    },
}

/// What happened to a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DeviceEventKind {
    /// Taken out of allocation by an operator.
    Cordoned,
    /// Put back into allocation.
    Uncordoned,
    /// Reported unhealthy (the detail says why).
    Unhealthy,
    /// Reported healthy again.
    Healthy,
    /// Newly published.
    Added,
    /// No longer published while allocated.
    Missing,
    /// Published again after being missing.
    Restored,
    /// No longer published and free, so removed.
    Removed,
}

impl DeviceEventKind {
    /// The name the admin API and the CLI show.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceEventKind::Cordoned => "cordoned",
            DeviceEventKind::Uncordoned => "uncordoned",
            DeviceEventKind::Unhealthy => "unhealthy",
            DeviceEventKind::Healthy => "healthy",
            DeviceEventKind::Added => "added",
            DeviceEventKind::Missing => "missing",
            DeviceEventKind::Restored => "restored",
            DeviceEventKind::Removed => "removed",
        }
    }
}

/// One event of a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceEvent {
    /// Unix milliseconds.
    pub at_ms: u64,
    /// What happened.
    pub kind: DeviceEventKind,
    /// More about it, or empty.
    pub detail: String,
}

/// A device's holders and events inside a window, each oldest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DeviceHistory {
    /// The holder intervals that overlap the window, by start.
    pub holders: Vec<HolderInterval>,
    /// The events inside the window, by time.
    pub events: Vec<DeviceEvent>,
}

/// The device an audit entry concerns and the event it means for it; `None` for entries that are
/// no device event.
fn device_event(event: &AuditEvent) -> Option<(&str, &str, DeviceEventKind, String)> {
    Some(match event {
        AuditEvent::Cordoned { node, device } => {
            (node, device, DeviceEventKind::Cordoned, String::new())
        }
        AuditEvent::Uncordoned { node, device } => {
            (node, device, DeviceEventKind::Uncordoned, String::new())
        }
        AuditEvent::DeviceAdded { node, device } => {
            (node, device, DeviceEventKind::Added, String::new())
        }
        AuditEvent::DeviceMissing { node, device } => {
            (node, device, DeviceEventKind::Missing, String::new())
        }
        AuditEvent::DeviceRestored { node, device } => {
            (node, device, DeviceEventKind::Restored, String::new())
        }
        AuditEvent::DeviceRemoved { node, device } => {
            (node, device, DeviceEventKind::Removed, String::new())
        }
        AuditEvent::DeviceHealthChanged {
            node, device, to, ..
        } => match to {
            Some(health) => (
                node,
                device,
                DeviceEventKind::Unhealthy,
                health.reason.clone(),
            ),
            None => (node, device, DeviceEventKind::Healthy, String::new()),
        },
        _ => return None,
    })
}

impl Tx<'_, '_> {
    /// Writes what audit entry `event`, made at `at_ms`, means for the history: opens the
    /// intervals of an allocation or import (the allocation is already written), closes those of
    /// a release or abort, or records a device event.
    pub(crate) fn record_history(&mut self, event: &AuditEvent, at_ms: u64) -> Result<()> {
        match event {
            AuditEvent::Allocated { claim_uid, .. } | AuditEvent::Imported { claim_uid, .. } => {
                let Some(allocation) = self.allocation(claim_uid)? else {
                    return Ok(());
                };
                for device in &allocation.devices {
                    let entry = HistoryEntry::Held {
                        claim_uid: claim_uid.clone(),
                        namespace: allocation.namespace.clone(),
                        name: allocation.name.clone(),
                        from_ms: at_ms,
                        to_ms: None,
                        share_permille: self.import_shares.get(device).copied(),
                    };
                    self.append_history(&allocation.node, device, entry)?;
                }
                Ok(())
            }
            AuditEvent::Released {
                claim_uid,
                node,
                devices,
            }
            | AuditEvent::Aborted {
                claim_uid,
                node,
                devices,
            } => {
                for device in devices {
                    self.close_interval(node, device, claim_uid, at_ms)?;
                }
                Ok(())
            }
            other => match device_event(other) {
                Some((node, device, kind, detail)) => {
                    let entry = HistoryEntry::Event {
                        at_ms,
                        kind,
                        detail,
                    };
                    let (node, device) = (node.to_owned(), device.to_owned());
                    self.append_history(&node, &device, entry)
                }
                None => Ok(()),
            },
        }
    }

    fn append_history(&mut self, node: &str, device: &str, entry: HistoryEntry) -> Result<()> {
        let seq = HistorySeq(self.state.next_history);
        let record = HistoryRecord {
            node: node.to_owned(),
            device: device.to_owned(),
            entry,
        };
        self.tables
            .history_devices
            .insert(HistoryDeviceKey::new(node, device, seq), ())
            .map_err(LedgerError::storage)?;
        self.tables
            .history
            .insert(seq, Ok(record))
            .map_err(LedgerError::storage)?;
        self.state.next_history += 1;
        Ok(())
    }

    /// Ends the open interval of `claim_uid` on the device at `at_ms`, searching the device's
    /// history from the newest entry back.
    fn close_interval(
        &mut self,
        node: &str,
        device: &str,
        claim_uid: &str,
        at_ms: u64,
    ) -> Result<()> {
        let range = HistoryDeviceKey::device_range(node, device);
        let mut found = None;
        for entry in self
            .tables
            .history_devices
            .range(range)
            .map_err(LedgerError::storage)?
            .rev()
        {
            let seq = entry.map_err(LedgerError::storage)?.0.value().seq();
            let Some(value) = self.tables.history.get(seq).map_err(LedgerError::storage)? else {
                continue;
            };
            let mut record = decoded("history", value.value())?;
            if let HistoryEntry::Held {
                claim_uid: holder,
                to_ms: to_ms @ None,
                ..
            } = &mut record.entry
            {
                if holder == claim_uid {
                    *to_ms = Some(at_ms);
                    found = Some((seq, record));
                    break;
                }
            }
        }
        if let Some((seq, record)) = found {
            self.tables
                .history
                .insert(seq, Ok(record))
                .map_err(LedgerError::storage)?;
        }
        Ok(())
    }
}

/// The start of a history entry, and its end (`None` while open; an event ends at its time).
pub(super) fn span(entry: &HistoryEntry) -> (u64, Option<u64>) {
    match entry {
        HistoryEntry::Held { from_ms, to_ms, .. } => (*from_ms, *to_ms),
        HistoryEntry::Event { at_ms, .. } => (*at_ms, Some(*at_ms)),
    }
}

/// Whether a history entry is old enough to prune: closed (or an event) before `cutoff_ms`.
pub(crate) fn expired(record: &HistoryRecord, cutoff_ms: u64) -> bool {
    matches!(span(&record.entry), (_, Some(end)) if end < cutoff_ms)
}
