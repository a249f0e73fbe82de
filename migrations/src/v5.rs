//! Schema version 5, frozen as released: every table of version 4 ([`crate::v4`]) unchanged,
//! plus `history_hours`, the hourly rollup of holder intervals per namespace, node and model,
//! with raw-bytes stand-ins for its types.
//!
//! Nothing here may change once released: a stored table name, type name or record layout is part
//! of the file format. The allocator's `ledger::tables` must produce exactly these names (checked
//! by its tests).

use crate::v1::raw_type;

raw_type!(
    /// `big-endian u64 hour start (unix ms) namespace 0x00 node 0x00 model`, ordered bytewise.
    HistoryHourKey, "dra_ledger::HistoryHourKey@v1", None
);
raw_type!(
    /// Postcard bytes of one hour's totals of a namespace, node and model.
    HistoryHourRecord, "dra_ledger::HistoryHourRecord@v1", None
);

/// Hourly totals of the holder intervals rolled up out of `history`, by hour first.
pub const HISTORY_HOURS: redb::TableDefinition<HistoryHourKey, HistoryHourRecord> =
    redb::TableDefinition::new("history_hours");

/// Every table name of schema version 5, `meta` included.
pub const TABLE_NAMES: [&str; 12] = [
    "meta",
    "devices",
    "allocations",
    "intents",
    "pending_intents",
    "claim_intents",
    "audit",
    "admin_access",
    "device_health",
    "history",
    "history_devices",
    "history_hours",
];

/// The step from version 4: creates the empty `history_hours` table. No existing record changes;
/// the running ledger rolls old intervals up from then on.
pub(crate) fn from_v4(txn: &redb::WriteTransaction) -> Result<(), crate::migrate::StepError> {
    txn.open_table(HISTORY_HOURS)?;
    Ok(())
}
