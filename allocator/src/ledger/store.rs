//! Low-level access to the tables: decoding with errors instead of panics, converting stored
//! records to the fitting layer's views, and deriving the writer's in-memory state from a file.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition, TableError};

use super::records::{Consumer, DeviceRecord, StoredSharing};
use super::tables::{DeviceKey, Stored, Undecodable, AUDIT, DEVICES, HISTORY, INTENTS};
use super::{LedgerError, Result};
use crate::fit::{Consumers, DeviceView, Inventory, NodeView, SharedConsumer};
use crate::model::{Attributes, Device};

/// The source of "now" in unix milliseconds; tests pass a fake one.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

/// A decoded record, or the error naming its table.
pub(crate) fn decoded<T>(
    table: &'static str,
    value: std::result::Result<T, Undecodable>,
) -> Result<T> {
    value.map_err(|error| LedgerError::RecordDecode {
        table,
        reason: error.reason,
    })
}

/// Opens a table in a read transaction.
pub(crate) fn read_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &ReadTransaction,
    definition: TableDefinition<K, V>,
) -> Result<redb::ReadOnlyTable<K, V>> {
    txn.open_table(definition).map_err(|error| match error {
        TableError::TableDoesNotExist(name) => {
            LedgerError::Storage(format!("table {name} is missing from the ledger file"))
        }
        other => LedgerError::storage(other),
    })
}

/// The model attributes of a stored device.
pub(crate) fn attributes_of(record: &DeviceRecord) -> Result<Attributes> {
    record
        .attributes
        .iter()
        .map(|(name, value)| {
            value
                .to_model()
                .map(|v| (name.clone(), v))
                .map_err(|reason| LedgerError::RecordDecode {
                    table: "devices",
                    reason: format!("attribute {name}: {reason}"),
                })
        })
        .collect()
}

/// The fitting layer's view of a device's consumers.
pub(crate) fn consumers_of(consumers: &[Consumer]) -> Consumers {
    if consumers.is_empty() {
        return Consumers::None;
    }
    if let Some(exclusive) = consumers
        .iter()
        .find(|c| c.sharing == StoredSharing::Exclusive)
    {
        return Consumers::Exclusive {
            claim_uid: exclusive.claim_uid.clone(),
        };
    }
    Consumers::Shared(
        consumers
            .iter()
            .map(|c| SharedConsumer {
                claim_uid: c.claim_uid.clone(),
                max_consumers: match c.sharing {
                    StoredSharing::Shared { max_consumers } => max_consumers,
                    StoredSharing::Exclusive => 1,
                },
            })
            .collect(),
    )
}

/// The fitting layer's view of one stored device.
pub(crate) fn device_view(name: &str, record: &DeviceRecord) -> Result<DeviceView> {
    Ok(DeviceView {
        device: Device {
            name: name.to_owned(),
            attributes: attributes_of(record)?,
        },
        cordoned: record.cordoned,
        missing: record.missing,
        consumers: consumers_of(&record.consumers),
    })
}

/// Builds the inventory from the devices table, one node at a time: a device's key starts with
/// its node's name and a NUL, which no name contains, so each node's devices are one run of
/// the table, and only one node's devices are ever decoded at once.
pub(crate) fn inventory_from(
    table: &impl ReadableTable<DeviceKey, Stored<DeviceRecord>>,
) -> Result<Inventory> {
    let fit_error = |error: crate::fit::FitError| LedgerError::RecordDecode {
        table: "devices",
        reason: error.to_string(),
    };
    let mut inventory = Inventory::new();
    let mut run: Option<(String, Vec<DeviceView>)> = None;
    let add = |inventory: &mut Inventory, (name, mut devices): (String, Vec<DeviceView>)| {
        if inventory.entry(&name).is_some() {
            return Err(LedgerError::RecordDecode {
                table: "devices",
                reason: format!("the devices of node {name} are not one run of the table"),
            });
        }
        // Grown one device at a time: a node keeps only what it holds.
        devices.shrink_to_fit();
        inventory
            .upsert_node(NodeView::new(name, devices))
            .map_err(fit_error)
    };
    for entry in table.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let (node, device) = key.value().parts();
        let record = decoded("devices", value.value())?;
        let view = device_view(&device, &record)?;
        match &mut run {
            Some((name, devices)) if *name == node => devices.push(view),
            _ => {
                if let Some(done) = run.replace((node, vec![view])) {
                    add(&mut inventory, done)?;
                }
            }
        }
    }
    if let Some(done) = run {
        add(&mut inventory, done)?;
    }
    Ok(inventory)
}

/// Builds the inventory from a committed snapshot.
pub(crate) fn load_inventory(txn: &ReadTransaction) -> Result<Inventory> {
    inventory_from(&read_table(txn, DEVICES)?)
}

/// The next number of each growing sequence of the file.
pub(crate) struct NextSequences {
    pub(crate) intent: u64,
    pub(crate) audit: u64,
    pub(crate) history: u64,
}

/// The next intent id, audit sequence number and history sequence number of a committed
/// snapshot.
pub(crate) fn next_sequences(txn: &ReadTransaction) -> Result<NextSequences> {
    let next = |last: Option<u64>| last.map_or(1, |last| last + 1);
    let intent = read_table(txn, INTENTS)?
        .last()
        .map_err(LedgerError::storage)?
        .map(|(key, _)| key.value().0);
    let audit = read_table(txn, AUDIT)?
        .last()
        .map_err(LedgerError::storage)?
        .map(|(key, _)| key.value().0);
    let history = read_table(txn, HISTORY)?
        .last()
        .map_err(LedgerError::storage)?
        .map(|(key, _)| key.value().0);
    Ok(NextSequences {
        intent: next(intent),
        audit: next(audit),
        history: next(history),
    })
}

/// How many entries a table holds.
pub(crate) fn count(table: &impl ReadableTableMetadata) -> Result<u64> {
    table.len().map_err(LedgerError::storage)
}

/// A stable 64-bit FNV-1a hash (the request fingerprint; never `std`'s randomised hasher).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
