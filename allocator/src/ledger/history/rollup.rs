//! The rollup of old holder intervals into hourly totals (schema version 5), inside the batch's
//! write transaction: intervals that ended before the rollup horizon are added to the totals of
//! every hour they overlap (per namespace, node and model) and removed from the history with
//! their index entries; hours older than the retention are dropped. Both a bounded amount per
//! batch. The arithmetic is `crate::usage::hours`; this file only does storage.

use std::collections::HashMap;

use redb::ReadableTable;

use super::views::{interval, model_attribute};
use super::{HistoryEntry, HistoryRecord};
use crate::ledger::store::decoded;
use crate::ledger::tables::{DeviceKey, HistoryDeviceKey, HistoryHourKey, HistorySeq};
use crate::ledger::txn::Tables;
use crate::ledger::{LedgerError, Result};
use crate::usage::hours::{roll_up, HOUR_MS};

impl Tables<'_> {
    /// Rolls up at most about `most` holder intervals that ended before `horizon_ms`, scanning the
    /// history from `cursor` at most `4 * most` entries (events and open intervals stay and are
    /// stepped over). The intervals of one claim are adjacent and rolled up together, so that the
    /// claim counts once per hour. `cursor` is where the next scan resumes: 0 once the scan
    /// reached an entry that began after the horizon, or the end.
    pub(crate) fn roll_up_history(
        &mut self,
        horizon_ms: u64,
        most: usize,
        cursor: &mut u64,
    ) -> Result<()> {
        let mut doomed: Vec<(HistorySeq, HistoryRecord)> = Vec::new();
        let mut resume = 0;
        for (examined, entry) in self
            .history
            .range(HistorySeq(*cursor)..)
            .map_err(LedgerError::storage)?
            .enumerate()
        {
            let (key, value) = entry.map_err(LedgerError::storage)?;
            let seq = key.value();
            let record = decoded("history", value.value())?;
            let same_claim = match (&record.entry, doomed.last()) {
                (HistoryEntry::Held { claim_uid, .. }, Some((_, last))) => matches!(
                    &last.entry,
                    HistoryEntry::Held { claim_uid: previous, .. } if previous == claim_uid
                ),
                _ => false,
            };
            if !same_claim && (doomed.len() >= most || examined >= most.saturating_mul(4)) {
                resume = seq.0;
                break;
            }
            if !record.started_before(horizon_ms) {
                break;
            }
            if matches!(record.entry, HistoryEntry::Held { to_ms: Some(end), .. } if end < horizon_ms)
            {
                doomed.push((seq, record));
            }
        }
        *cursor = resume;
        if doomed.is_empty() {
            return Ok(());
        }
        let mut intervals = Vec::with_capacity(doomed.len());
        let mut models: HashMap<(String, String), Option<String>> = HashMap::new();
        for (seq, record) in doomed {
            self.history.remove(seq).map_err(LedgerError::storage)?;
            self.history_devices
                .remove(HistoryDeviceKey::new(&record.node, &record.device, seq))
                .map_err(LedgerError::storage)?;
            let device = (record.node.clone(), record.device.clone());
            let model = if let Some(model) = models.get(&device) {
                model.clone()
            } else {
                let model = self.model(&device.0, &device.1)?;
                models.insert(device, model.clone());
                model
            };
            intervals.extend(interval(record, model));
        }
        for hour in roll_up(&intervals) {
            let key = HistoryHourKey::new(
                hour.hour_ms,
                &hour.namespace,
                &hour.node,
                hour.model.as_deref(),
            );
            let mut record = self
                .history_hours
                .get(&key)
                .map_err(LedgerError::storage)?
                .map(|value| decoded("history_hours", value.value()))
                .transpose()?
                .unwrap_or_default();
            record.merge(hour.record);
            self.history_hours
                .insert(key, Ok(record))
                .map_err(LedgerError::storage)?;
        }
        Ok(())
    }

    /// The `model` attribute of a device the ledger still records.
    fn model(&self, node: &str, device: &str) -> Result<Option<String>> {
        let value = self
            .devices
            .get(DeviceKey::new(node, device))
            .map_err(LedgerError::storage)?;
        Ok(match value {
            Some(value) => model_attribute(&decoded("devices", value.value())?),
            None => None,
        })
    }

    /// Drops at most `most` hours that ended before `cutoff_ms`, oldest first.
    pub(crate) fn prune_hours(&mut self, cutoff_ms: u64, most: usize) -> Result<()> {
        let mut doomed = Vec::new();
        for entry in self
            .history_hours
            .range(..HistoryHourKey::hour_start(cutoff_ms.saturating_sub(HOUR_MS - 1)))
            .map_err(LedgerError::storage)?
            .take(most)
        {
            doomed.push(entry.map_err(LedgerError::storage)?.0.value());
        }
        for key in doomed {
            self.history_hours
                .remove(key)
                .map_err(LedgerError::storage)?;
        }
        Ok(())
    }
}
