//! The verify check of the history tables: the device index agrees with the history, every
//! record decodes, and the open intervals are exactly the devices of the current allocations.

use std::collections::{BTreeMap, BTreeSet};

use redb::{ReadTransaction, ReadableTable};

use super::HistoryEntry;
use crate::ledger::records::AllocationRecord;
use crate::ledger::store::read_table;
use crate::ledger::tables::{HistoryDeviceKey, HISTORY, HISTORY_DEVICES};
use crate::ledger::{LedgerError, Result};

/// Adds a problem for every broken history invariant; returns how many history records there are.
pub(crate) fn check(
    txn: &ReadTransaction,
    allocations: &BTreeMap<String, AllocationRecord>,
    problems: &mut Vec<String>,
) -> Result<u64> {
    let mut expected_index = BTreeSet::new();
    let mut open = BTreeSet::new();
    let mut records = 0;
    for entry in read_table(txn, HISTORY)?
        .iter()
        .map_err(LedgerError::storage)?
    {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let seq = key.value();
        records += 1;
        let record = match value.value() {
            Ok(record) => record,
            Err(error) => {
                problems.push(format!(
                    "history record {} does not decode: {}",
                    seq.0, error.reason
                ));
                continue;
            }
        };
        expected_index.insert(HistoryDeviceKey::new(&record.node, &record.device, seq));
        if let HistoryEntry::Held {
            claim_uid,
            to_ms: None,
            ..
        } = record.entry
        {
            let holder = (claim_uid, record.node, record.device);
            if !open.insert(holder.clone()) {
                problems.push(format!(
                    "claim {} has two open history intervals on {}/{}",
                    holder.0, holder.1, holder.2
                ));
            }
        }
    }
    let mut index = BTreeSet::new();
    for entry in read_table(txn, HISTORY_DEVICES)?
        .iter()
        .map_err(LedgerError::storage)?
    {
        index.insert(entry.map_err(LedgerError::storage)?.0.value());
    }
    for key in index.symmetric_difference(&expected_index) {
        problems.push(format!(
            "history index entry {} disagrees with the history",
            key.seq().0
        ));
    }
    let held: BTreeSet<(String, String, String)> = allocations
        .iter()
        .flat_map(|(uid, record)| {
            record
                .devices
                .iter()
                .map(|device| (uid.clone(), record.node.clone(), device.clone()))
        })
        .collect();
    for (uid, node, device) in open.difference(&held) {
        problems.push(format!(
            "history interval of claim {uid} on {node}/{device} is open without an allocation"
        ));
    }
    for (uid, node, device) in held.difference(&open) {
        problems.push(format!(
            "allocation of claim {uid} on {node}/{device} has no open history interval"
        ));
    }
    Ok(records)
}
