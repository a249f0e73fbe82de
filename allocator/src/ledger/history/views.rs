//! Read views of the history, each from one read snapshot: the holder intervals of a window, the
//! hourly totals of the hours inside it and one device's history.

use redb::{ReadTransaction, ReadableTable};

use super::{span, DeviceEvent, DeviceHistory, HistoryEntry, HistoryRecord};
use crate::ledger::records::{DeviceRecord, StoredAttribute};
use crate::ledger::store::{decoded, read_table};
use crate::ledger::tables::{
    DeviceKey, HistoryDeviceKey, HistoryHourKey, DEVICES, HISTORY, HISTORY_DEVICES, HISTORY_HOURS,
};
use crate::ledger::{LedgerError, Result};
use crate::usage::hours::{hour_at_or_after, HourTotals};
use crate::usage::HolderInterval;

/// The holder interval of a history record with its device's model; `None` for an event.
pub(super) fn interval(record: HistoryRecord, model: Option<String>) -> Option<HolderInterval> {
    match record.entry {
        HistoryEntry::Held {
            claim_uid,
            namespace,
            name,
            from_ms,
            to_ms,
            share_permille,
        } => Some(HolderInterval {
            node: record.node,
            device: record.device,
            model,
            claim_uid,
            namespace,
            name,
            from_ms,
            to_ms,
            share_permille,
        }),
        HistoryEntry::Event { .. } => None,
    }
}

/// The `model` attribute of a device the ledger still records.
fn model_of(txn: &ReadTransaction, node: &str, device: &str) -> Result<Option<String>> {
    let devices = read_table(txn, DEVICES)?;
    let Some(value) = devices
        .get(DeviceKey::new(node, device))
        .map_err(LedgerError::storage)?
    else {
        return Ok(None);
    };
    Ok(model_attribute(&decoded("devices", value.value())?))
}

/// The `model` attribute of a device record, when it is a string.
pub(super) fn model_attribute(record: &DeviceRecord) -> Option<String> {
    match record.attributes.get("model") {
        Some(StoredAttribute::String(model)) => Some(model.clone()),
        _ => None,
    }
}

/// The hourly totals of every hour that starts inside `[from_ms, to_ms)`, oldest hour first.
pub(crate) fn hour_totals(
    txn: &ReadTransaction,
    from_ms: u64,
    to_ms: u64,
) -> Result<Vec<HourTotals>> {
    let table = read_table(txn, HISTORY_HOURS)?;
    let range = HistoryHourKey::hour_start(hour_at_or_after(from_ms))
        ..HistoryHourKey::hour_start(hour_at_or_after(to_ms));
    let mut out = Vec::new();
    for entry in table.range(range).map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let (hour_ms, namespace, node, model) = key.value().parts();
        out.push(HourTotals {
            hour_ms,
            namespace,
            node,
            model,
            record: decoded("history_hours", value.value())?,
        });
    }
    Ok(out)
}

/// Every holder interval that overlaps `[from_ms, to_ms)`, oldest first, with its device's model.
pub(crate) fn intervals(
    txn: &ReadTransaction,
    from_ms: u64,
    to_ms: u64,
) -> Result<Vec<HolderInterval>> {
    let history = read_table(txn, HISTORY)?;
    let mut models = std::collections::HashMap::new();
    let mut out = Vec::new();
    for entry in history.iter().map_err(LedgerError::storage)? {
        let (_, value) = entry.map_err(LedgerError::storage)?;
        let record = decoded("history", value.value())?;
        let (start, end) = span(&record.entry);
        if start >= to_ms || end.is_some_and(|end| end <= from_ms) {
            continue;
        }
        let key = (record.node.clone(), record.device.clone());
        let model = if let Some(model) = models.get(&key) {
            Option::clone(model)
        } else {
            let model = model_of(txn, &key.0, &key.1)?;
            models.insert(key, model.clone());
            model
        };
        out.extend(interval(record, model));
    }
    Ok(out)
}

/// The history of `device` on `node` inside `[from_ms, to_ms)`; `None` when the ledger has none
/// for it at all.
pub(crate) fn device_history(
    txn: &ReadTransaction,
    node: &str,
    device: &str,
    from_ms: u64,
    to_ms: u64,
) -> Result<Option<DeviceHistory>> {
    let index = read_table(txn, HISTORY_DEVICES)?;
    let history = read_table(txn, HISTORY)?;
    let model = model_of(txn, node, device)?;
    let range = HistoryDeviceKey::device_range(node, device);
    let mut any = false;
    let mut out = DeviceHistory::default();
    for entry in index.range(range).map_err(LedgerError::storage)? {
        any = true;
        let seq = entry.map_err(LedgerError::storage)?.0.value().seq();
        let Some(value) = history.get(seq).map_err(LedgerError::storage)? else {
            continue;
        };
        let record = decoded("history", value.value())?;
        let (start, end) = span(&record.entry);
        let inside = match record.entry {
            HistoryEntry::Event { .. } => start >= from_ms && start < to_ms,
            HistoryEntry::Held { .. } => start < to_ms && end.is_none_or(|end| end > from_ms),
        };
        if !inside {
            continue;
        }
        match record.entry {
            HistoryEntry::Event {
                at_ms,
                kind,
                detail,
            } => out.events.push(DeviceEvent {
                at_ms,
                kind,
                detail,
            }),
            HistoryEntry::Held { .. } => out.holders.extend(interval(record, model.clone())),
        }
    }
    out.holders.sort_by_key(|holder| holder.from_ms);
    out.events.sort_by_key(|event| event.at_ms);
    Ok(any.then_some(out))
}
