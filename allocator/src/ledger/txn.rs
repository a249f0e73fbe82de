//! Table access inside the writer's transaction: typed get/put/remove, the journal and the audit
//! log with their retention bounds. Every write of an operation goes through here. The tables are
//! opened once per batch ([`Tables`]) and shared by all of its operations, and the journal and
//! the audit log are pruned back to their bounds (and the history rolled up and pruned by age)
//! once per batch ([`Tables::prune`]), after its last operation, instead of after every append.

use redb::{ReadableTable, ReadableTableMetadata, Table, WriteTransaction};

use super::history::{expired, HistoryRecord};
use super::records::{
    AdminAccessRecord, AllocationRecord, AuditEvent, AuditRecord, DeviceHealthRecord, DeviceRecord,
    IntentRecord, Resolution,
};
use super::store::decoded;
use super::tables::{
    AuditSeq, ClaimIntentKey, ClaimUid, DeviceKey, HistoryDeviceKey, HistoryHourKey, HistorySeq,
    IntentId, Stored, ADMIN_ACCESS, ALLOCATIONS, AUDIT, CLAIM_INTENTS, DEVICES, DEVICE_HEALTH,
    HISTORY, HISTORY_DEVICES, HISTORY_HOURS, INTENTS, PENDING_INTENTS,
};
use super::writer::{Retention, Tx};
use super::{LedgerError, Result};
use crate::usage::hours::HourRecord;

/// How many journal entries one batch prunes at most per operation it carries, so that no
/// commit stalls on a backlog (after the retention bound was lowered, say).
const PRUNE_PER_OPERATION: usize = 64;

/// Every table an operation touches, open for the whole batch's transaction. Opening a table
/// costs a lookup of its root; doing it once per batch instead of once per access keeps that out
/// of every operation. Must be dropped before the transaction commits or aborts.
pub(crate) struct Tables<'t> {
    allocations: Table<'t, ClaimUid, Stored<AllocationRecord>>,
    pub(super) devices: Table<'t, DeviceKey, Stored<DeviceRecord>>,
    intents: Table<'t, IntentId, Stored<IntentRecord>>,
    pending: Table<'t, ClaimUid, IntentId>,
    by_claim: Table<'t, ClaimIntentKey, ()>,
    audit: Table<'t, AuditSeq, Stored<AuditRecord>>,
    admin_access: Table<'t, ClaimUid, Stored<AdminAccessRecord>>,
    health: Table<'t, DeviceKey, Stored<DeviceHealthRecord>>,
    pub(super) history: Table<'t, HistorySeq, Stored<HistoryRecord>>,
    pub(super) history_devices: Table<'t, HistoryDeviceKey, ()>,
    pub(super) history_hours: Table<'t, HistoryHourKey, Stored<HourRecord>>,
}

impl<'t> Tables<'t> {
    /// Opens the tables inside `txn`.
    pub(crate) fn open(txn: &'t WriteTransaction) -> Result<Self> {
        let storage = LedgerError::storage;
        Ok(Tables {
            allocations: txn.open_table(ALLOCATIONS).map_err(storage)?,
            devices: txn.open_table(DEVICES).map_err(storage)?,
            intents: txn.open_table(INTENTS).map_err(storage)?,
            pending: txn.open_table(PENDING_INTENTS).map_err(storage)?,
            by_claim: txn.open_table(CLAIM_INTENTS).map_err(storage)?,
            audit: txn.open_table(AUDIT).map_err(storage)?,
            admin_access: txn.open_table(ADMIN_ACCESS).map_err(storage)?,
            health: txn.open_table(DEVICE_HEALTH).map_err(storage)?,
            history: txn.open_table(HISTORY).map_err(storage)?,
            history_devices: txn.open_table(HISTORY_DEVICES).map_err(storage)?,
            history_hours: txn.open_table(HISTORY_HOURS).map_err(storage)?,
        })
    }

    /// Prunes the oldest resolved journal entries and the history entries that ended before
    /// `now_ms` (the batch's last clock reading; 0, no history pruning) less the history
    /// retention, rolls the holder intervals that ended before `now_ms` less the rollup age up
    /// into hourly totals (resuming the scan at `rollup_cursor`) and drops the hours older than
    /// the retention (each at most [`PRUNE_PER_OPERATION`] per operation of the batch), and the
    /// oldest audit entries beyond their retention bound. Called once per batch after its
    /// operations, so the bounds hold at every commit.
    pub(crate) fn prune(
        &mut self,
        retention: Retention,
        operations: usize,
        now_ms: u64,
        rollup_cursor: &mut u64,
    ) -> Result<()> {
        let most = operations.max(1) * PRUNE_PER_OPERATION;
        self.prune_intents(retention.intents, most)?;
        if now_ms > 0 {
            let retained_from = now_ms.saturating_sub(retention.history_ms);
            self.prune_history(retained_from, most)?;
            self.roll_up_history(
                now_ms.saturating_sub(retention.rollup_after_ms),
                most,
                rollup_cursor,
            )?;
            self.prune_hours(retained_from, most)?;
        }
        let mut excess = self
            .audit
            .len()
            .map_err(LedgerError::storage)?
            .saturating_sub(retention.audit);
        while excess > 0 {
            self.audit.pop_first().map_err(LedgerError::storage)?;
            excess -= 1;
        }
        Ok(())
    }

    /// Removes at most `most` history entries that ended before `cutoff_ms`, oldest first. The
    /// scan stops at the first entry that started at or after the cutoff (every later one did
    /// too) and looks at no more than `4 * most` entries, so that intervals still open at the
    /// front cost a bounded amount per batch.
    fn prune_history(&mut self, cutoff_ms: u64, most: usize) -> Result<()> {
        let mut doomed = Vec::new();
        for entry in self
            .history
            .iter()
            .map_err(LedgerError::storage)?
            .take(most.saturating_mul(4))
        {
            if doomed.len() >= most {
                break;
            }
            let (key, value) = entry.map_err(LedgerError::storage)?;
            let record = decoded("history", value.value())?;
            if !record.started_before(cutoff_ms) {
                break;
            }
            if expired(&record, cutoff_ms) {
                doomed.push((key.value(), record.node, record.device));
            }
        }
        for (seq, node, device) in doomed {
            self.history.remove(seq).map_err(LedgerError::storage)?;
            self.history_devices
                .remove(HistoryDeviceKey::new(&node, &device, seq))
                .map_err(LedgerError::storage)?;
        }
        Ok(())
    }

    fn prune_intents(&mut self, retention: u64, most: usize) -> Result<()> {
        let excess = self
            .intents
            .len()
            .map_err(LedgerError::storage)?
            .saturating_sub(retention);
        if excess == 0 {
            return Ok(());
        }
        let mut doomed = Vec::new();
        for entry in self.intents.iter().map_err(LedgerError::storage)? {
            if doomed.len() as u64 >= excess || doomed.len() >= most {
                break;
            }
            let (key, value) = entry.map_err(LedgerError::storage)?;
            let record = decoded("intents", value.value())?;
            if !record.is_open() {
                doomed.push((key.value(), record.claim_uid));
            }
        }
        for (id, uid) in doomed {
            self.intents.remove(id).map_err(LedgerError::storage)?;
            self.by_claim
                .remove(ClaimIntentKey::new(&uid, id))
                .map_err(LedgerError::storage)?;
        }
        Ok(())
    }
}

impl Tx<'_, '_> {
    /// Now, from the ledger's clock (remembered for pruning the history).
    pub(crate) fn now(&self) -> u64 {
        let now = (self.state.clock)();
        self.state.last_now.set(now);
        now
    }

    pub(crate) fn allocation(&self, uid: &str) -> Result<Option<AllocationRecord>> {
        let value = self
            .tables
            .allocations
            .get(ClaimUid::new(uid))
            .map_err(LedgerError::storage)?;
        value.map(|v| decoded("allocations", v.value())).transpose()
    }

    pub(crate) fn put_allocation(&mut self, uid: &str, record: AllocationRecord) -> Result<()> {
        self.tables
            .allocations
            .insert(ClaimUid::new(uid), Ok(record))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    pub(crate) fn remove_allocation(&mut self, uid: &str) -> Result<()> {
        self.tables
            .allocations
            .remove(ClaimUid::new(uid))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    pub(crate) fn admin_access(&self, uid: &str) -> Result<Option<AdminAccessRecord>> {
        let value = self
            .tables
            .admin_access
            .get(ClaimUid::new(uid))
            .map_err(LedgerError::storage)?;
        value
            .map(|v| decoded("admin_access", v.value()))
            .transpose()
    }

    /// Every admin-access record by claim UID.
    pub(crate) fn admin_accesses(&self) -> Result<Vec<(String, AdminAccessRecord)>> {
        let mut out = Vec::new();
        for entry in self
            .tables
            .admin_access
            .iter()
            .map_err(LedgerError::storage)?
        {
            let (key, value) = entry.map_err(LedgerError::storage)?;
            out.push((
                key.value().as_string(),
                decoded("admin_access", value.value())?,
            ));
        }
        Ok(out)
    }

    pub(crate) fn put_admin_access(&mut self, uid: &str, record: AdminAccessRecord) -> Result<()> {
        self.tables
            .admin_access
            .insert(ClaimUid::new(uid), Ok(record))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    pub(crate) fn remove_admin_access(&mut self, uid: &str) -> Result<()> {
        self.tables
            .admin_access
            .remove(ClaimUid::new(uid))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    /// The health record of a device; `None` when it is healthy.
    pub(crate) fn health(&self, node: &str, device: &str) -> Result<Option<DeviceHealthRecord>> {
        let value = self
            .tables
            .health
            .get(DeviceKey::new(node, device))
            .map_err(LedgerError::storage)?;
        value
            .map(|v| decoded("device_health", v.value()))
            .transpose()
    }

    /// Records a device unhealthy (`Some`) or healthy (`None`).
    pub(crate) fn set_health(
        &mut self,
        node: &str,
        device: &str,
        record: Option<DeviceHealthRecord>,
    ) -> Result<()> {
        let key = DeviceKey::new(node, device);
        match record {
            Some(record) => self.tables.health.insert(key, Ok(record)).map(|_| ()),
            None => self.tables.health.remove(key).map(|_| ()),
        }
        .map_err(LedgerError::storage)
    }

    pub(crate) fn device(&self, node: &str, device: &str) -> Result<Option<DeviceRecord>> {
        let value = self
            .tables
            .devices
            .get(DeviceKey::new(node, device))
            .map_err(LedgerError::storage)?;
        value.map(|v| decoded("devices", v.value())).transpose()
    }

    /// All devices of `node` by name.
    pub(crate) fn node_devices(&self, node: &str) -> Result<Vec<(String, DeviceRecord)>> {
        let range = self
            .tables
            .devices
            .range(DeviceKey::node_start(node)..DeviceKey::node_end(node))
            .map_err(LedgerError::storage)?;
        let mut devices = Vec::new();
        for entry in range {
            let (key, value) = entry.map_err(LedgerError::storage)?;
            devices.push((key.value().parts().1, decoded("devices", value.value())?));
        }
        Ok(devices)
    }

    pub(crate) fn put_device(
        &mut self,
        node: &str,
        device: &str,
        record: DeviceRecord,
    ) -> Result<()> {
        self.tables
            .devices
            .insert(DeviceKey::new(node, device), Ok(record))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    pub(crate) fn remove_device(&mut self, node: &str, device: &str) -> Result<()> {
        self.tables
            .devices
            .remove(DeviceKey::new(node, device))
            .map_err(LedgerError::storage)?;
        Ok(())
    }

    /// Appends a journal entry (and its claim index entry; an open allocate intent also goes
    /// into the pending index). The batch prunes the journal after its last operation.
    pub(crate) fn journal(&mut self, record: IntentRecord) -> Result<IntentId> {
        let id = IntentId(self.state.next_intent);
        let tables = &mut *self.tables;
        tables
            .by_claim
            .insert(ClaimIntentKey::new(&record.claim_uid, id), ())
            .map_err(LedgerError::storage)?;
        if record.is_open() {
            tables
                .pending
                .insert(ClaimUid::new(&record.claim_uid), id)
                .map_err(LedgerError::storage)?;
        }
        tables
            .intents
            .insert(id, Ok(record))
            .map_err(LedgerError::storage)?;
        self.state.next_intent += 1;
        Ok(id)
    }

    /// Resolves the open allocate intent `id` and drops it from the pending index.
    pub(crate) fn resolve(&mut self, id: u64, resolution: Resolution) -> Result<()> {
        let at = self.now();
        let tables = &mut *self.tables;
        let record = tables
            .intents
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
        let uid = ClaimUid::new(&record.claim_uid);
        tables
            .intents
            .insert(IntentId(id), Ok(record))
            .map_err(LedgerError::storage)?;
        tables.pending.remove(uid).map_err(LedgerError::storage)?;
        Ok(())
    }

    /// Appends an audit entry; the batch prunes the log after its last operation.
    /// The history follows every entry in the same transaction (see `history`).
    pub(crate) fn audit(&mut self, event: AuditEvent) -> Result<()> {
        let seq = AuditSeq(self.state.next_audit);
        let at_ms = self.now();
        self.record_history(&event, at_ms)?;
        let record = AuditRecord { at_ms, event };
        self.tables
            .audit
            .insert(seq, Ok(record))
            .map_err(LedgerError::storage)?;
        self.state.next_audit += 1;
        Ok(())
    }
}
