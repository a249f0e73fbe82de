//! Device health (schema version 3): which devices are unhealthy, why and since when, each
//! change an audit entry. Health does not change what a device holds: an unhealthy device keeps
//! its consumers and its state (`free`, `allocated`, ...); the views report health beside it.
//! The record of a device goes with the device when it leaves the ledger.
//!
//! Owns the operation inside the writer's transaction, the read views and the verify check of
//! the `device_health` table; must not be used by `fit` or `model`.

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable};
use serde::{Deserialize, Serialize};

use super::records::{AuditEvent, DeviceHealthRecord, DeviceRecord};
use super::store::{decoded, read_table};
use super::tables::{DeviceKey, DEVICES, DEVICE_HEALTH};
use super::writer::Tx;
use super::{Ledger, LedgerError, Result};

/// Why and since when a device is unhealthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceHealth {
    /// The reason, e.g. `XidCritical`.
    pub reason: String,
    /// Unix milliseconds since when.
    pub since_ms: u64,
}

/// One device's health change; `None` is healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthChange {
    /// The device.
    pub device: String,
    /// Its health before.
    pub from: Option<DeviceHealth>,
    /// Its health now.
    pub to: Option<DeviceHealth>,
}

/// An unhealthy device of the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnhealthyDevice {
    /// The node.
    pub node: String,
    /// The device.
    pub device: String,
    /// Why and since when.
    pub health: DeviceHealth,
}

fn stored(health: &DeviceHealth) -> DeviceHealthRecord {
    DeviceHealthRecord {
        reason: health.reason.clone(),
        since_ms: health.since_ms,
    }
}

fn view(record: DeviceHealthRecord) -> DeviceHealth {
    DeviceHealth {
        reason: record.reason,
        since_ms: record.since_ms,
    }
}

impl Ledger {
    /// Sets the health of `node`'s devices: those in `unhealthy` are unhealthy with that reason
    /// and time, every other device of the node is healthy. Names the ledger does not hold on
    /// the node are ignored. Each change is an audit entry; the same health again writes
    /// nothing. Returns the changes.
    pub fn set_node_health(
        &self,
        node: &str,
        unhealthy: BTreeMap<String, DeviceHealth>,
    ) -> Result<Vec<HealthChange>> {
        let node = node.to_owned();
        self.inner
            .writer
            .submit(move |tx| set_node_health(tx, &node, &unhealthy))
    }

    /// Every unhealthy device, by node and device.
    pub fn unhealthy_devices(&self) -> Result<Vec<UnhealthyDevice>> {
        all(&self.read()?)
    }
}

fn set_node_health(
    tx: &mut Tx<'_, '_>,
    node: &str,
    unhealthy: &BTreeMap<String, DeviceHealth>,
) -> Result<Vec<HealthChange>> {
    let mut changes = Vec::new();
    for (device, _) in tx.node_devices(node)? {
        let from = tx.health(node, &device)?;
        let to = unhealthy.get(&device).map(stored);
        if from == to {
            continue;
        }
        tx.set_health(node, &device, to.clone())?;
        tx.audit(AuditEvent::DeviceHealthChanged {
            node: node.to_owned(),
            device: device.clone(),
            from: from.clone(),
            to: to.clone(),
        })?;
        changes.push(HealthChange {
            device,
            from: from.map(view),
            to: to.map(view),
        });
    }
    Ok(changes)
}

/// Drops the health records of `removed`, devices of `node` just deleted from the ledger.
pub(crate) fn forget_devices(tx: &mut Tx<'_, '_>, node: &str, removed: &[String]) -> Result<()> {
    for device in removed {
        tx.set_health(node, device, None)?;
    }
    Ok(())
}

/// Every unhealthy device of the snapshot.
pub(crate) fn all(txn: &ReadTransaction) -> Result<Vec<UnhealthyDevice>> {
    let table = read_table(txn, DEVICE_HEALTH)?;
    let mut out = Vec::new();
    for entry in table.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let (node, device) = key.value().parts();
        out.push(UnhealthyDevice {
            node,
            device,
            health: view(decoded("device_health", value.value())?),
        });
    }
    Ok(out)
}

/// The unhealthy devices of `node`, by device name.
pub(crate) fn of_node(txn: &ReadTransaction, node: &str) -> Result<BTreeMap<String, DeviceHealth>> {
    let table = read_table(txn, DEVICE_HEALTH)?;
    let mut out = BTreeMap::new();
    let range = table
        .range(DeviceKey::node_start(node)..DeviceKey::node_end(node))
        .map_err(LedgerError::storage)?;
    for entry in range {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        out.insert(
            key.value().parts().1,
            view(decoded("device_health", value.value())?),
        );
    }
    Ok(out)
}

/// The number of unhealthy devices per node, and how many of them a claim holds.
pub(crate) fn count_by_node(txn: &ReadTransaction) -> Result<BTreeMap<String, (u64, u64)>> {
    let devices = read_table(txn, DEVICES)?;
    let mut counts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for unhealthy in all(txn)? {
        let held = devices
            .get(DeviceKey::new(&unhealthy.node, &unhealthy.device))
            .map_err(LedgerError::storage)?
            .map(|v| decoded("devices", v.value()))
            .transpose()?
            .is_some_and(|record| !record.consumers.is_empty());
        let count = counts.entry(unhealthy.node).or_default();
        count.0 += 1;
        count.1 += u64::from(held);
    }
    Ok(counts)
}

/// The verify check of the `device_health` table: every record decodes and its device is in
/// the ledger. Returns how many records it checked.
pub(crate) fn check(
    txn: &ReadTransaction,
    devices: &BTreeMap<(String, String), DeviceRecord>,
    problems: &mut Vec<String>,
) -> Result<u64> {
    let table = read_table(txn, DEVICE_HEALTH)?;
    let mut checked = 0;
    for entry in table.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let (node, device) = key.value().parts();
        checked += 1;
        if let Err(error) = value.value() {
            problems.push(format!(
                "health of device {node}/{device} does not decode: {}",
                error.reason
            ));
        }
        if !devices.contains_key(&(node.clone(), device.clone())) {
            problems.push(format!(
                "health of device {node}/{device} is recorded but the ledger does not hold it"
            ));
        }
    }
    Ok(checked)
}
