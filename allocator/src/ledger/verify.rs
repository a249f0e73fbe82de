//! The consistency check: every invariant stated in `tables.rs`, over one read snapshot, plus
//! the agreement of the writer's in-memory inventory with the file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use redb::{ReadTransaction, ReadableTable};

use super::records::{AllocationRecord, AllocationState, DeviceRecord, StoredSharing};
use super::store::{self, count, read_table};
use super::tables::{ALLOCATIONS, AUDIT, CLAIM_INTENTS, DEVICES, INTENTS, PENDING_INTENTS};
use super::types::VerifyReport;
use super::{LedgerError, Result};
use crate::fit::Inventory;

/// Checks the file's tables against each other. Undecodable records are reported as problems.
pub(crate) fn verify_snapshot(
    txn: &ReadTransaction,
    path: &Path,
    driver_name: &str,
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let problems = &mut report.problems;
    match dra_migrations::read_meta(txn, path) {
        Ok(info) => {
            if info.schema_version != dra_migrations::CURRENT_SCHEMA_VERSION {
                problems.push(format!("schema version is {}", info.schema_version));
            }
            if info.driver_name != driver_name {
                problems.push(format!("driver name is {}", info.driver_name));
            }
        }
        Err(error) => problems.push(format!("meta: {error}")),
    }

    let mut devices: BTreeMap<(String, String), DeviceRecord> = BTreeMap::new();
    for entry in read_table(txn, DEVICES)?
        .iter()
        .map_err(LedgerError::storage)?
    {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let (node, device) = key.value().parts();
        match value.value() {
            Ok(record) => {
                devices.insert((node, device), record);
            }
            Err(error) => problems.push(format!(
                "device {node}/{device} does not decode: {}",
                error.reason
            )),
        }
    }
    let mut allocations: BTreeMap<String, AllocationRecord> = BTreeMap::new();
    for entry in read_table(txn, ALLOCATIONS)?
        .iter()
        .map_err(LedgerError::storage)?
    {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let uid = key.value().as_string();
        match value.value() {
            Ok(record) => {
                allocations.insert(uid, record);
            }
            Err(error) => problems.push(format!(
                "allocation {uid} does not decode: {}",
                error.reason
            )),
        }
    }
    check_devices(&devices, &allocations, problems);
    check_allocations(&devices, &allocations, problems);
    check_journal(txn, &allocations, problems)?;
    report.admin_access = super::admin_access::check(txn, &devices, problems)?;
    report.health = super::health::check(txn, &devices, problems)?;
    report.history = super::history::check(txn, &allocations, problems)?;
    report.devices = devices.len() as u64;
    report.allocations = allocations.len() as u64;
    report.intents = count(&read_table(txn, INTENTS)?)?;
    let audit = read_table(txn, AUDIT)?;
    for entry in audit.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        if let Err(error) = value.value() {
            report.problems.push(format!(
                "audit entry {} does not decode: {}",
                key.value().0,
                error.reason
            ));
        }
    }
    report.audit_entries = count(&audit)?;
    Ok(report)
}

fn check_devices(
    devices: &BTreeMap<(String, String), DeviceRecord>,
    allocations: &BTreeMap<String, AllocationRecord>,
    problems: &mut Vec<String>,
) {
    for ((node, device), record) in devices {
        let consumers = &record.consumers;
        let uids: BTreeSet<&str> = consumers.iter().map(|c| c.claim_uid.as_str()).collect();
        if uids.len() != consumers.len() {
            problems.push(format!("device {node}/{device} lists a consumer twice"));
        }
        let exclusive = consumers
            .iter()
            .filter(|c| c.sharing == StoredSharing::Exclusive)
            .count();
        if exclusive > 0 && consumers.len() > 1 {
            problems.push(format!(
                "exclusive device {node}/{device} has {} consumers",
                consumers.len()
            ));
        }
        let bound = consumers
            .iter()
            .filter_map(|c| match c.sharing {
                StoredSharing::Shared { max_consumers } => Some(max_consumers),
                StoredSharing::Exclusive => None,
            })
            .min();
        if let Some(bound) = bound {
            if consumers.len() as u64 > u64::from(bound) {
                problems.push(format!(
                    "shared device {node}/{device} has {} consumers, over maxConsumers {bound}",
                    consumers.len()
                ));
            }
        }
        if record.missing && consumers.is_empty() {
            problems.push(format!("missing device {node}/{device} has no consumers"));
        }
        for consumer in consumers {
            match allocations.get(&consumer.claim_uid) {
                Some(a) if a.node == *node && a.devices.contains(device) => {
                    if a.sharing != consumer.sharing {
                        problems.push(format!(
                            "device {node}/{device} records claim {} with other sharing",
                            consumer.claim_uid
                        ));
                    }
                }
                _ => problems.push(format!(
                    "device {node}/{device} lists claim {} whose allocation does not name it",
                    consumer.claim_uid
                )),
            }
        }
    }
}

fn check_allocations(
    devices: &BTreeMap<(String, String), DeviceRecord>,
    allocations: &BTreeMap<String, AllocationRecord>,
    problems: &mut Vec<String>,
) {
    for (uid, allocation) in allocations {
        if allocation.devices.is_empty() {
            problems.push(format!("allocation {uid} names no devices"));
        }
        let distinct: BTreeSet<&String> = allocation.devices.iter().collect();
        if distinct.len() != allocation.devices.len() {
            problems.push(format!("allocation {uid} names a device twice"));
        }
        for device in &allocation.devices {
            match devices.get(&(allocation.node.clone(), device.clone())) {
                None => problems.push(format!(
                    "allocation {uid} names device {}/{device} which does not exist",
                    allocation.node
                )),
                Some(record) if !record.consumers.iter().any(|c| c.claim_uid == *uid) => {
                    problems.push(format!(
                        "allocation {uid} names device {}/{device} which does not list it",
                        allocation.node
                    ));
                }
                Some(_) => {}
            }
        }
    }
}

fn check_journal(
    txn: &ReadTransaction,
    allocations: &BTreeMap<String, AllocationRecord>,
    problems: &mut Vec<String>,
) -> Result<()> {
    let intents = read_table(txn, INTENTS)?;
    let mut journal = BTreeMap::new();
    for entry in intents.iter().map_err(LedgerError::storage)? {
        let (key, value) = entry.map_err(LedgerError::storage)?;
        let id = key.value().0;
        match value.value() {
            Ok(record) => {
                journal.insert(id, record);
            }
            Err(error) => problems.push(format!("intent {id} does not decode: {}", error.reason)),
        }
    }
    let mut pending = BTreeMap::new();
    for entry in read_table(txn, PENDING_INTENTS)?
        .iter()
        .map_err(LedgerError::storage)?
    {
        let (key, id) = entry.map_err(LedgerError::storage)?;
        pending.insert(key.value().as_string(), id.value().0);
    }
    for (uid, id) in &pending {
        match allocations.get(uid) {
            Some(a) if a.state == AllocationState::Pending && a.intent == *id => {}
            _ => problems.push(format!(
                "pending intent {id} of claim {uid} has no pending allocation made by it"
            )),
        }
        match journal.get(id) {
            Some(record) if record.is_open() && record.claim_uid == *uid => {}
            _ => problems.push(format!(
                "pending intent {id} of claim {uid} is not an open allocate intent of that claim"
            )),
        }
    }
    for (uid, allocation) in allocations {
        if allocation.state == AllocationState::Pending && !pending.contains_key(uid) {
            problems.push(format!("pending allocation {uid} has no pending intent"));
        }
    }
    for (id, record) in &journal {
        if record.is_open() && pending.get(&record.claim_uid) != Some(id) {
            problems.push(format!("open intent {id} is not in the pending index"));
        }
    }
    let mut indexed = BTreeSet::new();
    for entry in read_table(txn, CLAIM_INTENTS)?
        .iter()
        .map_err(LedgerError::storage)?
    {
        let (key, _) = entry.map_err(LedgerError::storage)?;
        let key = key.value();
        let id = key.intent().0;
        indexed.insert(id);
        match journal.get(&id) {
            Some(record)
                if key == super::tables::ClaimIntentKey::new(&record.claim_uid, key.intent()) => {}
            _ => problems.push(format!(
                "claim index entry for intent {id} does not match the journal"
            )),
        }
    }
    for id in journal.keys() {
        if !indexed.contains(id) {
            problems.push(format!("intent {id} is missing from the claim index"));
        }
    }
    Ok(())
}

/// Inside the writer: whether the in-memory inventory equals the one the file describes.
pub(crate) fn inventory_agrees(
    txn: &ReadTransaction,
    memory: &Inventory,
) -> Result<Option<String>> {
    let from_file = store::load_inventory(txn)?;
    let memory: Vec<_> = memory.nodes().collect();
    let file: Vec<_> = from_file.nodes().collect();
    if memory == file {
        Ok(None)
    } else {
        Ok(Some(
            "the writer's in-memory inventory differs from the devices table".to_owned(),
        ))
    }
}
