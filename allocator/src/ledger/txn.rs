//! Table access inside the writer's transaction: typed get/put/remove, the journal and the audit
//! log with their retention bounds. Every write of an operation goes through here.

use redb::{ReadableTable, ReadableTableMetadata};

use super::records::{
    AllocationRecord, AuditEvent, AuditRecord, DeviceRecord, IntentRecord, Resolution,
};
use super::store::decoded;
use super::tables::{
    AuditSeq, ClaimIntentKey, ClaimUid, DeviceKey, IntentId, ALLOCATIONS, AUDIT, CLAIM_INTENTS,
    DEVICES, INTENTS, PENDING_INTENTS,
};
use super::writer::Tx;
use super::{LedgerError, Result};

/// How many journal entries one operation prunes at most, so no single operation stalls.
const PRUNE_PER_OPERATION: usize = 64;

impl Tx<'_> {
    /// Now, from the ledger's clock.
    pub(crate) fn now(&self) -> u64 {
        (self.state.clock)()
    }

    pub(crate) fn allocation(&self, uid: &str) -> Result<Option<AllocationRecord>> {
        let table = self
            .txn
            .open_table(ALLOCATIONS)
            .map_err(LedgerError::storage)?;
        let value = table
            .get(ClaimUid::new(uid))
            .map_err(LedgerError::storage)?;
        value.map(|v| decoded("allocations", v.value())).transpose()
    }

    pub(crate) fn put_allocation(&self, uid: &str, record: AllocationRecord) -> Result<()> {
        let mut table = self
            .txn
            .open_table(ALLOCATIONS)
            .map_err(LedgerError::storage)?;
        table
            .insert(ClaimUid::new(uid), Ok(record))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    pub(crate) fn remove_allocation(&self, uid: &str) -> Result<()> {
        let mut table = self
            .txn
            .open_table(ALLOCATIONS)
            .map_err(LedgerError::storage)?;
        table
            .remove(ClaimUid::new(uid))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    pub(crate) fn device(&self, node: &str, device: &str) -> Result<Option<DeviceRecord>> {
        let table = self.txn.open_table(DEVICES).map_err(LedgerError::storage)?;
        let value = table
            .get(DeviceKey::new(node, device))
            .map_err(LedgerError::storage)?;
        value.map(|v| decoded("devices", v.value())).transpose()
    }

    /// All devices of `node` by name.
    pub(crate) fn node_devices(&self, node: &str) -> Result<Vec<(String, DeviceRecord)>> {
        let table = self.txn.open_table(DEVICES).map_err(LedgerError::storage)?;
        let range = table
            .range(DeviceKey::node_start(node)..DeviceKey::node_end(node))
            .map_err(LedgerError::storage)?;
        let mut devices = Vec::new();
        for entry in range {
            let (key, value) = entry.map_err(LedgerError::storage)?;
            devices.push((key.value().parts().1, decoded("devices", value.value())?));
        }
        Ok(devices)
    }

    pub(crate) fn put_device(&self, node: &str, device: &str, record: DeviceRecord) -> Result<()> {
        let mut table = self.txn.open_table(DEVICES).map_err(LedgerError::storage)?;
        table
            .insert(DeviceKey::new(node, device), Ok(record))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    pub(crate) fn remove_device(&self, node: &str, device: &str) -> Result<()> {
        let mut table = self.txn.open_table(DEVICES).map_err(LedgerError::storage)?;
        table
            .remove(DeviceKey::new(node, device))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    /// Appends a journal entry (and its claim index entry; an open allocate intent also goes
    /// into the pending index), then prunes the oldest resolved entries beyond retention.
    pub(crate) fn journal(&mut self, record: IntentRecord) -> Result<IntentId> {
        let id = IntentId(self.state.next_intent);
        {
            let mut by_claim = self
                .txn
                .open_table(CLAIM_INTENTS)
                .map_err(LedgerError::storage)?;
            by_claim
                .insert(ClaimIntentKey::new(&record.claim_uid, id), ())
                .map_err(LedgerError::storage)?;
            if record.is_open() {
                let mut pending = self
                    .txn
                    .open_table(PENDING_INTENTS)
                    .map_err(LedgerError::storage)?;
                pending
                    .insert(ClaimUid::new(&record.claim_uid), id)
                    .map_err(LedgerError::storage)?;
            }
            let mut intents = self.txn.open_table(INTENTS).map_err(LedgerError::storage)?;
            intents
                .insert(id, Ok(record))
                .map_err(LedgerError::storage)?;
        }
        self.state.next_intent += 1;
        self.prune_intents()?;
        Ok(id)
    }

    /// Resolves the open allocate intent `id` and drops it from the pending index.
    pub(crate) fn resolve(&self, id: u64, resolution: Resolution) -> Result<()> {
        let at = self.now();
        let mut intents = self.txn.open_table(INTENTS).map_err(LedgerError::storage)?;
        let record = intents
            .get(IntentId(id))
            .map_err(LedgerError::storage)?
            .map(|v| decoded("intents", v.value()))
            .transpose()?;
        let Some(mut record) = record else {
            return Err(LedgerError::Storage(format!(
                "intent {id} is missing from the journal"
            )));
        };
        record.resolution = Some((resolution, at));
        let uid = record.claim_uid.clone();
        intents
            .insert(IntentId(id), Ok(record))
            .map_err(LedgerError::storage)?;
        let mut pending = self
            .txn
            .open_table(PENDING_INTENTS)
            .map_err(LedgerError::storage)?;
        pending
            .remove(ClaimUid::new(&uid))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    /// Appends an audit entry and prunes the oldest beyond retention.
    pub(crate) fn audit(&mut self, event: AuditEvent) -> Result<()> {
        let seq = AuditSeq(self.state.next_audit);
        let record = AuditRecord {
            at_ms: self.now(),
            event,
        };
        let mut table = self.txn.open_table(AUDIT).map_err(LedgerError::storage)?;
        table
            .insert(seq, Ok(record))
            .map_err(LedgerError::storage)?;
        self.state.next_audit += 1;
        let mut excess = table
            .len()
            .map_err(LedgerError::storage)?
            .saturating_sub(self.state.retention.audit);
        while excess > 0 {
            table.pop_first().map_err(LedgerError::storage)?;
            excess -= 1;
        }
        Ok(())
    }

    fn prune_intents(&mut self) -> Result<()> {
        let mut intents = self.txn.open_table(INTENTS).map_err(LedgerError::storage)?;
        let excess = intents
            .len()
            .map_err(LedgerError::storage)?
            .saturating_sub(self.state.retention.intents);
        if excess == 0 {
            return Ok(());
        }
        let mut doomed = Vec::new();
        for entry in intents.iter().map_err(LedgerError::storage)? {
            if doomed.len() as u64 >= excess || doomed.len() >= PRUNE_PER_OPERATION {
                break;
            }
            let (key, value) = entry.map_err(LedgerError::storage)?;
            let record = decoded("intents", value.value())?;
            if !record.is_open() {
                doomed.push((key.value(), record.claim_uid));
            }
        }
        let mut by_claim = self
            .txn
            .open_table(CLAIM_INTENTS)
            .map_err(LedgerError::storage)?;
        for (id, uid) in doomed {
            intents.remove(id).map_err(LedgerError::storage)?;
            by_claim
                .remove(ClaimIntentKey::new(&uid, id))
                .map_err(LedgerError::storage)?;
        }
        Ok(())
    }
}
