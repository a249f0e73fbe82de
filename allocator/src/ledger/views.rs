//! Read views for the admin API, each from one consistent read snapshot. They never go through
//! the writer, so reads do not wait for commits.

use std::collections::{BTreeMap, HashMap};

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata};

use super::ops::allocation_view;
use super::records::{DeviceRecord, StoredAttribute, StoredSharing};
use super::store::{attributes_of, decoded, read_table};
use super::tables::{
    AuditSeq, ClaimIntentKey, ClaimUid, DeviceKey, IntentId, ALLOCATIONS, AUDIT, CLAIM_INTENTS,
    DEVICES, INTENTS, PENDING_INTENTS,
};
use super::types::{
    Allocation, AllocationPage, AllocationQuery, AuditEntry, ClaimDetail, ClaimRef, DeviceConsumer,
    DeviceCounts, DeviceStatus, Intent, NodeSummary, PendingIntent, Utilisation,
};
use super::{LedgerError, Result};

/// Default page size of [`allocations`].
const DEFAULT_PAGE: usize = 100;

fn add_counts(counts: &mut DeviceCounts, record: &DeviceRecord) {
    counts.total += 1;
    if record.consumers.is_empty() {
        if !record.cordoned && !record.missing {
            counts.free += 1;
        }
    } else {
        counts.allocated += 1;
    }
    if record
        .consumers
        .iter()
        .any(|c| matches!(c.sharing, StoredSharing::Shared { .. }))
    {
        counts.shared += 1;
    }
    counts.cordoned += u64::from(record.cordoned);
    counts.missing += u64::from(record.missing);
}

pub(crate) fn nodes(txn: &ReadTransaction) -> Result<Vec<NodeSummary>> {
    let table = read_table(txn, DEVICES)?;
    let mut nodes: Vec<NodeSummary> = Vec::new();
    for entry in table.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let record = decoded("devices", value.value())?;
        add_node_counts(&mut nodes, key.value().parts().0, &record);
    }
    add_admin_access(txn, &mut nodes)?;
    Ok(nodes)
}

/// Fills in each node's count of admin-access claims and of unhealthy devices.
fn add_admin_access(txn: &ReadTransaction, nodes: &mut [NodeSummary]) -> Result<()> {
    let counts = super::admin_access::count_by_node(txn)?;
    let unhealthy = super::health::count_by_node(txn)?;
    for summary in nodes {
        summary.admin_access = counts.get(&summary.node).copied().unwrap_or(0);
        let (all, allocated) = unhealthy.get(&summary.node).copied().unwrap_or_default();
        summary.unhealthy = all;
        summary.unhealthy_allocated = allocated;
    }
    Ok(())
}

/// Counts `record`, a device of `node`, into `nodes`, which the devices table fills in node
/// order (a new node starts a new summary).
fn add_node_counts(nodes: &mut Vec<NodeSummary>, node: String, record: &DeviceRecord) {
    if nodes.last().is_none_or(|last| last.node != node) {
        nodes.push(NodeSummary {
            node,
            counts: DeviceCounts::default(),
            admin_access: 0,
            unhealthy: 0,
            unhealthy_allocated: 0,
        });
    }
    if let Some(last) = nodes.last_mut() {
        add_counts(&mut last.counts, record);
    }
}

pub(crate) fn node_devices(txn: &ReadTransaction, node: &str) -> Result<Option<Vec<DeviceStatus>>> {
    let table = read_table(txn, DEVICES)?;
    let mut devices = Vec::new();
    let range = table
        .range(DeviceKey::node_start(node)..DeviceKey::node_end(node))
        .map_err(LedgerError::storage)?;
    let mut admin_access = super::admin_access::claims_by_device(txn, node)?;
    let mut health = super::health::of_node(txn, node)?;
    for entry in range {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let record = decoded("devices", value.value())?;
        let name = key.value().parts().1;
        devices.push(DeviceStatus {
            admin_access: admin_access.remove(&name).unwrap_or_default(),
            health: health.remove(&name),
            name,
            attributes: attributes_of(&record)?,
            cordoned: record.cordoned,
            missing: record.missing,
            consumers: record
                .consumers
                .iter()
                .map(|c| DeviceConsumer {
                    claim_uid: c.claim_uid.clone(),
                    sharing: c.sharing.into(),
                })
                .collect(),
        });
    }
    Ok((!devices.is_empty()).then_some(devices))
}

pub(crate) fn allocation(txn: &ReadTransaction, uid: &str) -> Result<Option<Allocation>> {
    let table = read_table(txn, ALLOCATIONS)?;
    let value = table
        .get(ClaimUid::new(uid))
        .map_err(LedgerError::storage)?;
    value
        .map(|v| decoded("allocations", v.value()).map(|record| allocation_view(uid, &record)))
        .transpose()
}

fn intent_view(id: u64, record: super::records::IntentRecord) -> Intent {
    Intent {
        id,
        claim_uid: record.claim_uid,
        kind: record.kind,
        node: record.node,
        devices: record.devices,
        at_ms: record.at_ms,
        resolution: record.resolution,
    }
}

pub(crate) fn claim(txn: &ReadTransaction, uid: &str) -> Result<Option<ClaimDetail>> {
    let allocation = allocation(txn, uid)?;
    let index = read_table(txn, CLAIM_INTENTS)?;
    let intents_table = read_table(txn, INTENTS)?;
    let mut intents = Vec::new();
    let range = index
        .range(ClaimIntentKey::claim_start(uid)..=ClaimIntentKey::claim_end(uid))
        .map_err(LedgerError::storage)?;
    for entry in range {
        let (key, _) = entry.map_err(LedgerError::storage)?;
        let id = key.value().intent();
        if let Some(value) = intents_table.get(id).map_err(LedgerError::storage)? {
            intents.push(intent_view(id.0, decoded("intents", value.value())?));
        }
    }
    if allocation.is_none() && intents.is_empty() {
        return Ok(None);
    }
    Ok(Some(ClaimDetail {
        allocation,
        intents,
    }))
}

pub(crate) fn allocations(
    txn: &ReadTransaction,
    query: &AllocationQuery,
) -> Result<AllocationPage> {
    let limit = if query.limit == 0 {
        DEFAULT_PAGE
    } else {
        query.limit
    };
    let table = read_table(txn, ALLOCATIONS)?;
    let iter = match &query.after {
        Some(after) => table.range(ClaimUid::new(after)..),
        None => table.range::<ClaimUid>(..),
    }
    .map_err(LedgerError::storage)?;
    let mut items = Vec::new();
    let mut next = None;
    for entry in iter {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let uid = key.value().as_string();
        if query.after.as_deref() == Some(uid.as_str()) {
            continue;
        }
        let record = decoded("allocations", value.value())?;
        if query
            .namespace
            .as_ref()
            .is_some_and(|ns| *ns != record.namespace)
            || query.node.as_ref().is_some_and(|n| *n != record.node)
        {
            continue;
        }
        if items.len() == limit {
            next = items.last().map(|a: &Allocation| a.claim.uid.clone());
            break;
        }
        items.push(allocation_view(&uid, &record));
    }
    Ok(AllocationPage { items, next })
}

pub(crate) fn pending_intents(txn: &ReadTransaction) -> Result<Vec<PendingIntent>> {
    let pending = read_table(txn, PENDING_INTENTS)?;
    let allocations = read_table(txn, ALLOCATIONS)?;
    let intents = read_table(txn, INTENTS)?;
    let mut out = Vec::new();
    for entry in pending.iter().map_err(LedgerError::storage)? {
        let (key, id) = entry.map_err(LedgerError::storage)?;
        let uid = key.value().as_string();
        let IntentId(id) = id.value();
        let intent = intents
            .get(IntentId(id))
            .map_err(LedgerError::storage)?
            .map(|v| decoded("intents", v.value()))
            .transpose()?;
        let allocation = allocations
            .get(ClaimUid::new(&uid))
            .map_err(LedgerError::storage)?
            .map(|v| decoded("allocations", v.value()))
            .transpose()?;
        let (Some(intent), Some(allocation)) = (intent, allocation) else {
            return Err(LedgerError::Storage(format!(
                "pending intent {id} of claim {uid} has no journal entry or allocation"
            )));
        };
        out.push(PendingIntent {
            intent: id,
            claim: ClaimRef::new(&uid, &allocation.namespace, &allocation.name),
            pod_uid: allocation.pod_uid,
            node: intent.node,
            devices: intent.devices,
            created_ms: intent.at_ms,
        });
    }
    out.sort_by_key(|p| p.intent);
    Ok(out)
}

pub(crate) fn audit_since(
    txn: &ReadTransaction,
    after: u64,
    limit: usize,
) -> Result<Vec<AuditEntry>> {
    let table = read_table(txn, AUDIT)?;
    let mut out = Vec::new();
    for entry in table
        .range(AuditSeq(after.saturating_add(1))..)
        .map_err(LedgerError::storage)?
    {
        if out.len() >= limit {
            break;
        }
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let record = decoded("audit", value.value())?;
        out.push(AuditEntry {
            seq: key.value().0,
            at_ms: record.at_ms,
            event: record.event,
        });
    }
    Ok(out)
}

pub(crate) fn utilisation(txn: &ReadTransaction) -> Result<Utilisation> {
    utilisation_and_nodes(txn).map(|(utilisation, _)| utilisation)
}

/// [`utilisation`] and [`nodes`] from one pass over the devices. The counts per attribute
/// value are kept by stored value while counting, and each distinct value is rendered as text
/// once at the end (values of the same text count together).
pub(crate) fn utilisation_and_nodes(
    txn: &ReadTransaction,
) -> Result<(Utilisation, Vec<NodeSummary>)> {
    let table = read_table(txn, DEVICES)?;
    let mut totals = DeviceCounts::default();
    let mut nodes: Vec<NodeSummary> = Vec::new();
    let mut by_stored: HashMap<String, HashMap<StoredAttribute, DeviceCounts>> = HashMap::new();
    for entry in table.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let mut record: DeviceRecord = decoded("devices", value.value())?;
        add_node_counts(&mut nodes, key.value().parts().0, &record);
        add_counts(&mut totals, &record);
        for (name, stored) in std::mem::take(&mut record.attributes) {
            let counts = by_stored
                .entry(name)
                .or_default()
                .entry(stored)
                .or_default();
            add_counts(counts, &record);
        }
    }
    let mut by_attribute: BTreeMap<String, BTreeMap<String, DeviceCounts>> = BTreeMap::new();
    for (name, values) in by_stored {
        let texts = by_attribute.entry(name.clone()).or_default();
        for (stored, counts) in values {
            let text = stored
                .to_model()
                .map_err(|reason| LedgerError::RecordDecode {
                    table: "devices",
                    reason: format!("attribute {name}: {reason}"),
                })?
                .to_string();
            texts.entry(text).or_default().merge(&counts);
        }
    }
    let claims_allocated = read_table(txn, ALLOCATIONS)?
        .len()
        .map_err(LedgerError::storage)?;
    let intents_pending = read_table(txn, PENDING_INTENTS)?
        .len()
        .map_err(LedgerError::storage)?;
    let utilisation = Utilisation {
        totals,
        by_attribute,
        claims_allocated,
        intents_pending,
    };
    add_admin_access(txn, &mut nodes)?;
    Ok((utilisation, nodes))
}
