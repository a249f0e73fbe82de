//! Inventory operations inside the writer's transaction: a node's published devices, cordon and
//! uncordon, and recording allocations known from the cluster (ledger rebuild). A device that
//! vanishes while allocated is kept and marked missing, never dropped.

use std::collections::BTreeSet;

use super::ops::{allocation_view, check_name};
use super::records::{
    store_attributes, AllocationRecord, AllocationState, AuditEvent, Consumer, DeviceRecord,
    IntentKind, IntentRecord, StoredSharing,
};
use super::store::device_view;
use super::types::{Allocation, ImportRequest, InventoryChange};
use super::writer::Tx;
use super::{LedgerError, Result};
use crate::fit::NodeView;
use crate::model::Device;

fn out_of_step(error: &impl std::fmt::Display) -> LedgerError {
    LedgerError::Storage(format!("inventory out of step: {error}"))
}

/// Rebuilds one node of the in-memory inventory from the transaction's devices table.
pub(crate) fn refresh_node(tx: &mut Tx<'_, '_>, node: &str) -> Result<()> {
    let devices = tx.node_devices(node)?;
    if devices.is_empty() {
        tx.state.inventory.remove_node(node);
        return Ok(());
    }
    let views = devices
        .iter()
        .map(|(name, record)| device_view(name, record))
        .collect::<Result<Vec<_>>>()?;
    tx.state
        .inventory
        .upsert_node(NodeView::new(node, views))
        .map_err(|e| out_of_step(&e))
}

/// Replaces the published devices of `node`.
pub(crate) fn set_inventory(
    tx: &mut Tx<'_, '_>,
    node: &str,
    devices: &[Device],
) -> Result<InventoryChange> {
    check_name("node", node)?;
    let mut seen = BTreeSet::new();
    for device in devices {
        check_name("device", &device.name)?;
        if !seen.insert(device.name.as_str()) {
            return Err(LedgerError::InvalidInput {
                reason: format!("device {} appears twice on node {node}", device.name),
            });
        }
    }
    let existing = tx.node_devices(node)?;
    let mut change = InventoryChange::default();
    let mut events = Vec::new();
    for device in devices {
        let attributes = store_attributes(&device.attributes);
        if let Some((_, record)) = existing.iter().find(|(name, _)| *name == device.name) {
            if record.attributes == attributes && !record.missing {
                continue;
            }
            if record.missing {
                change.restored.push(device.name.clone());
                events.push(AuditEvent::DeviceRestored {
                    node: node.to_owned(),
                    device: device.name.clone(),
                });
            }
            if record.attributes != attributes {
                change.updated.push(device.name.clone());
            }
            let mut record = record.clone();
            record.attributes = attributes;
            record.missing = false;
            tx.put_device(node, &device.name, record)?;
        } else {
            change.added.push(device.name.clone());
            events.push(AuditEvent::DeviceAdded {
                node: node.to_owned(),
                device: device.name.clone(),
            });
            tx.put_device(
                node,
                &device.name,
                DeviceRecord {
                    attributes,
                    cordoned: false,
                    missing: false,
                    consumers: Vec::new(),
                },
            )?;
        }
    }
    for (name, record) in &existing {
        if seen.contains(name.as_str()) {
            continue;
        }
        let event = AuditEvent::DeviceRemoved {
            node: node.to_owned(),
            device: name.clone(),
        };
        if record.consumers.is_empty() {
            tx.remove_device(node, name)?;
            change.removed.push(name.clone());
            events.push(event);
        } else if !record.missing {
            let mut record = record.clone();
            record.missing = true;
            tx.put_device(node, name, record)?;
            change.marked_missing.push(name.clone());
            events.push(AuditEvent::DeviceMissing {
                node: node.to_owned(),
                device: name.clone(),
            });
        }
    }
    for event in events {
        tx.audit(event)?;
    }
    super::admin_access::forget_devices(tx, node, &change.removed)?;
    super::health::forget_devices(tx, node, &change.removed)?;
    refresh_node(tx, node)?;
    Ok(change)
}

/// Sets a device's cordon flag; `true` when it changed.
pub(crate) fn set_cordon(
    tx: &mut Tx<'_, '_>,
    node: &str,
    device: &str,
    cordoned: bool,
) -> Result<bool> {
    let mut record = tx
        .device(node, device)?
        .ok_or_else(|| LedgerError::DeviceNotFound {
            node: node.to_owned(),
            device: device.to_owned(),
        })?;
    if record.cordoned == cordoned {
        return Ok(false);
    }
    record.cordoned = cordoned;
    tx.put_device(node, device, record)?;
    tx.state
        .inventory
        .set_cordoned(node, device, cordoned)
        .map_err(|e| out_of_step(&e))?;
    let (node, device) = (node.to_owned(), device.to_owned());
    tx.audit(if cordoned {
        AuditEvent::Cordoned { node, device }
    } else {
        AuditEvent::Uncordoned { node, device }
    })?;
    Ok(true)
}

/// Whether `sharing` may join a device held by `consumers`.
fn compatible(consumers: &[Consumer], sharing: StoredSharing) -> bool {
    match sharing {
        StoredSharing::Exclusive => consumers.is_empty(),
        StoredSharing::Shared { max_consumers } => {
            let mut bound = max_consumers;
            for consumer in consumers {
                match consumer.sharing {
                    StoredSharing::Exclusive => return false,
                    StoredSharing::Shared { max_consumers } => bound = bound.min(max_consumers),
                }
            }
            (consumers.len() as u64) < u64::from(bound)
        }
    }
}

/// Records an allocation the cluster shows, as confirmed. Devices the ledger does not know yet
/// are recorded as missing until their node's inventory publishes them.
pub(crate) fn import(tx: &mut Tx<'_, '_>, request: &ImportRequest) -> Result<Allocation> {
    let uid = &request.claim.uid;
    check_name("claim uid", uid)?;
    check_name("node", &request.node)?;
    if request.devices.is_empty() {
        return Err(LedgerError::InvalidInput {
            reason: format!("imported claim {uid} names no devices"),
        });
    }
    let mut names = BTreeSet::new();
    for name in &request.devices {
        check_name("device", name)?;
        if !names.insert(name.as_str()) {
            return Err(LedgerError::InvalidInput {
                reason: format!("imported claim {uid} names device {name} twice"),
            });
        }
    }
    if let Some(existing) = tx.allocation(uid)? {
        let same_devices = existing.devices.iter().collect::<BTreeSet<_>>()
            == request.devices.iter().collect::<BTreeSet<_>>();
        if existing.node == request.node && same_devices {
            return Ok(allocation_view(uid, &existing));
        }
        return Err(LedgerError::ClaimConflict { uid: uid.clone() });
    }
    let sharing = StoredSharing::from(request.sharing);
    let mut devices = Vec::with_capacity(request.devices.len());
    for name in &request.devices {
        let record = tx.device(&request.node, name)?.unwrap_or(DeviceRecord {
            attributes: std::collections::BTreeMap::new(),
            cordoned: false,
            missing: true,
            consumers: Vec::new(),
        });
        if !compatible(&record.consumers, sharing) {
            return Err(LedgerError::DeviceConflict {
                node: request.node.clone(),
                device: name.clone(),
                uid: uid.clone(),
            });
        }
        devices.push((name, record));
    }
    let now = tx.now();
    let intent = tx.journal(IntentRecord {
        claim_uid: uid.clone(),
        kind: IntentKind::Import,
        node: request.node.clone(),
        devices: request.devices.clone(),
        at_ms: now,
        resolution: None,
    })?;
    for (name, mut record) in devices {
        record.consumers.push(Consumer {
            claim_uid: uid.clone(),
            sharing,
        });
        tx.put_device(&request.node, name, record)?;
    }
    let record = AllocationRecord {
        namespace: request.claim.namespace.clone(),
        name: request.claim.name.clone(),
        pod_uid: request.pod_uid.clone(),
        node: request.node.clone(),
        devices: request.devices.clone(),
        sharing,
        request_fingerprint: None,
        state: AllocationState::Confirmed,
        intent: intent.0,
        created_ms: now,
        updated_ms: now,
    };
    let view = allocation_view(uid, &record);
    tx.put_allocation(uid, record)?;
    tx.import_shares.clone_from(&request.share_permille);
    let audited = tx.audit(AuditEvent::Imported {
        claim_uid: uid.clone(),
        node: request.node.clone(),
        devices: request.devices.clone(),
    });
    tx.import_shares.clear();
    audited?;
    refresh_node(tx, &request.node)?;
    Ok(view)
}
