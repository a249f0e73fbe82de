//! Admin-access claims (schema version 2): who looks at which devices, kept apart from
//! allocations. An admin-access claim takes no device from anyone: it is no consumer, so the
//! device states, the utilisation, the exclusive-conflict checks and the writer's in-memory
//! inventory never see it. Its record only names devices the ledger holds; a device that leaves
//! the ledger is dropped from the records naming it (the record released once it names none),
//! and never kept as missing for an admin-access claim.
//!
//! Owns the operations inside the writer's transaction, the read views and the verify check of
//! the `admin_access` table; must not be used by `fit` or `model`.

use std::collections::{BTreeMap, BTreeSet};

use redb::{ReadTransaction, ReadableTable};
use serde::{Deserialize, Serialize};

use super::ops::check_name;
use super::records::{AdminAccessRecord, AuditEvent, DeviceRecord};
use super::store::{decoded, read_table};
use super::tables::{ClaimUid, ADMIN_ACCESS};
use super::types::{same_placement, ClaimRef};
use super::writer::Tx;
use super::{Ledger, LedgerError, Result};

/// An admin-access claim to record: the devices of `node` it looks at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminAccessRequest {
    /// The claim.
    pub claim: ClaimRef,
    /// The node of the devices.
    pub node: String,
    /// Device names on the node; each must be in the ledger.
    pub devices: Vec<String>,
}

/// An admin-access claim as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminAccess {
    /// The claim.
    pub claim: ClaimRef,
    /// The node of the devices.
    pub node: String,
    /// Device names on the node.
    pub devices: Vec<String>,
    /// Unix milliseconds when first recorded.
    pub recorded_ms: u64,
    /// Unix milliseconds of the last change.
    pub updated_ms: u64,
}

/// What [`Ledger::record_admin_access`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminAccessChange {
    /// The same record was there already; nothing was written.
    Unchanged,
    /// The claim was not recorded before.
    Recorded,
    /// The claim was recorded with another node, devices, namespace or name; replaced.
    Replaced,
}

/// Which admin-access claims [`Ledger::admin_accesses`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminAccessQuery {
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only this node.
    pub node: Option<String>,
}

fn view(uid: &str, record: &AdminAccessRecord) -> AdminAccess {
    AdminAccess {
        claim: ClaimRef::new(uid, &record.namespace, &record.name),
        node: record.node.clone(),
        devices: record.devices.clone(),
        recorded_ms: record.recorded_ms,
        updated_ms: record.updated_ms,
    }
}

impl Ledger {
    /// Records that claim `request.claim` has admin access to `request.devices` on
    /// `request.node`, or replaces what it had. Idempotent: the same record again writes nothing
    /// and adds no audit entry. Takes no device from anyone. A device the ledger does not hold is
    /// [`LedgerError::DeviceNotFound`], with nothing written.
    pub fn record_admin_access(&self, request: AdminAccessRequest) -> Result<AdminAccessChange> {
        self.inner.writer.submit(move |tx| record(tx, &request))
    }

    /// Forgets the admin access of claim `uid`; `None` when it had none.
    pub fn release_admin_access(&self, uid: &str) -> Result<Option<AdminAccess>> {
        let uid = uid.to_owned();
        self.inner.writer.submit(move |tx| release(tx, &uid))
    }

    /// The admin access of claim `uid`.
    pub fn admin_access(&self, uid: &str) -> Result<Option<AdminAccess>> {
        let txn = self.read()?;
        let table = read_table(&txn, ADMIN_ACCESS)?;
        let value = table
            .get(ClaimUid::new(uid))
            .map_err(LedgerError::storage)?;
        value
            .map(|v| decoded("admin_access", v.value()).map(|record| view(uid, &record)))
            .transpose()
    }

    /// Every admin-access claim matching `query`, by claim UID.
    pub fn admin_accesses(&self, query: &AdminAccessQuery) -> Result<Vec<AdminAccess>> {
        Ok(all(&self.read()?)?
            .into_iter()
            .filter(|a| {
                query
                    .namespace
                    .as_ref()
                    .is_none_or(|n| *n == a.claim.namespace)
            })
            .filter(|a| query.node.as_ref().is_none_or(|n| *n == a.node))
            .collect())
    }
}

/// Every admin-access claim of the snapshot, by claim UID.
pub(crate) fn all(txn: &ReadTransaction) -> Result<Vec<AdminAccess>> {
    let table = read_table(txn, ADMIN_ACCESS)?;
    let mut out = Vec::new();
    for entry in table.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let uid = key.value().as_string();
        out.push(view(&uid, &decoded("admin_access", value.value())?));
    }
    Ok(out)
}

/// The number of admin-access claims per node.
pub(crate) fn count_by_node(txn: &ReadTransaction) -> Result<BTreeMap<String, u64>> {
    let mut counts = BTreeMap::new();
    for access in all(txn)? {
        *counts.entry(access.node).or_default() += 1;
    }
    Ok(counts)
}

/// The claims with admin access to each device of `node`, by device name.
pub(crate) fn claims_by_device(
    txn: &ReadTransaction,
    node: &str,
) -> Result<BTreeMap<String, Vec<String>>> {
    let mut by_device: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for access in all(txn)?.into_iter().filter(|a| a.node == node) {
        for device in access.devices {
            by_device
                .entry(device)
                .or_default()
                .push(access.claim.uid.clone());
        }
    }
    Ok(by_device)
}

fn record(tx: &mut Tx<'_, '_>, request: &AdminAccessRequest) -> Result<AdminAccessChange> {
    let claim = &request.claim;
    check_name("claim uid", &claim.uid)?;
    check_name("claim namespace", &claim.namespace)?;
    check_name("claim name", &claim.name)?;
    check_name("node", &request.node)?;
    if request.devices.is_empty() {
        return Err(LedgerError::InvalidInput {
            reason: format!("admin access of claim {} names no devices", claim.uid),
        });
    }
    let mut devices: Vec<String> = Vec::with_capacity(request.devices.len());
    for device in &request.devices {
        check_name("device", device)?;
        if tx.device(&request.node, device)?.is_none() {
            return Err(LedgerError::DeviceNotFound {
                node: request.node.clone(),
                device: device.clone(),
            });
        }
        if !devices.contains(device) {
            devices.push(device.clone());
        }
    }
    let existing = tx.admin_access(&claim.uid)?;
    if let Some(held) = &existing {
        if held.namespace == claim.namespace
            && held.name == claim.name
            && same_placement(&held.node, &held.devices, &request.node, &devices)
        {
            return Ok(AdminAccessChange::Unchanged);
        }
    }
    let now = tx.now();
    let change = if existing.is_some() {
        AdminAccessChange::Replaced
    } else {
        AdminAccessChange::Recorded
    };
    tx.put_admin_access(
        &claim.uid,
        AdminAccessRecord {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            node: request.node.clone(),
            devices: devices.clone(),
            recorded_ms: existing.map_or(now, |held| held.recorded_ms),
            updated_ms: now,
        },
    )?;
    let (claim_uid, node) = (claim.uid.clone(), request.node.clone());
    tx.audit(match change {
        AdminAccessChange::Replaced => AuditEvent::AdminAccessReplaced {
            claim_uid,
            node,
            devices,
        },
        _ => AuditEvent::AdminAccessRecorded {
            claim_uid,
            node,
            devices,
        },
    })?;
    Ok(change)
}

fn release(tx: &mut Tx<'_, '_>, uid: &str) -> Result<Option<AdminAccess>> {
    let Some(record) = tx.admin_access(uid)? else {
        return Ok(None);
    };
    tx.remove_admin_access(uid)?;
    tx.audit(AuditEvent::AdminAccessReleased {
        claim_uid: uid.to_owned(),
        node: record.node.clone(),
        devices: record.devices.clone(),
    })?;
    Ok(Some(view(uid, &record)))
}

/// Drops `removed`, devices of `node` just deleted from the ledger, from every admin-access
/// record naming them; a record left with no device is released. Each change is audited.
pub(crate) fn forget_devices(tx: &mut Tx<'_, '_>, node: &str, removed: &[String]) -> Result<()> {
    if removed.is_empty() {
        return Ok(());
    }
    for (uid, mut record) in tx.admin_accesses()? {
        if record.node != node || !record.devices.iter().any(|d| removed.contains(d)) {
            continue;
        }
        record.devices.retain(|d| !removed.contains(d));
        if record.devices.is_empty() {
            release(tx, &uid)?;
            continue;
        }
        record.updated_ms = tx.now();
        let devices = record.devices.clone();
        tx.put_admin_access(&uid, record)?;
        tx.audit(AuditEvent::AdminAccessReplaced {
            claim_uid: uid,
            node: node.to_owned(),
            devices,
        })?;
    }
    Ok(())
}

/// The verify check of the `admin_access` table against the devices: every record decodes and
/// names at least one device, none twice, each held by the ledger on the record's node. Returns
/// how many records it checked.
pub(crate) fn check(
    txn: &ReadTransaction,
    devices: &BTreeMap<(String, String), DeviceRecord>,
    problems: &mut Vec<String>,
) -> Result<u64> {
    let table = read_table(txn, ADMIN_ACCESS)?;
    let mut checked = 0;
    for entry in table.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let uid = key.value().as_string();
        checked += 1;
        let record = match value.value() {
            Ok(record) => record,
            Err(error) => {
                problems.push(format!(
                    "admin access {uid} does not decode: {}",
                    error.reason
                ));
                continue;
            }
        };
        if record.devices.is_empty() {
            problems.push(format!("admin access {uid} names no devices"));
        }
        let distinct: BTreeSet<&String> = record.devices.iter().collect();
        if distinct.len() != record.devices.len() {
            problems.push(format!("admin access {uid} names a device twice"));
        }
        for device in &record.devices {
            if !devices.contains_key(&(record.node.clone(), device.clone())) {
                problems.push(format!(
                    "admin access {uid} names device {}/{device} which the ledger does not hold",
                    record.node
                ));
            }
        }
    }
    Ok(checked)
}
