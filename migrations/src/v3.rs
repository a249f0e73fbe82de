//! Schema version 3, frozen as released: every table of version 2 ([`crate::v2`]) unchanged,
//! plus the `device_health` table, with a raw-bytes stand-in for its value type.
//!
//! Nothing here may change once released: a stored table name or type name is part of the file
//! format. The allocator's `ledger::tables` must produce exactly these names (checked by its
//! tests).

use redb::TableDefinition;

use crate::v1::DeviceKey;

crate::v1::raw_type!(
    /// Postcard bytes of a device health record.
    DeviceHealthRecord, "dra_ledger::DeviceHealthRecord@v1", None
);

/// The unhealthy devices keyed by device (`node 0x00 device`); a device without an entry is
/// healthy.
pub const DEVICE_HEALTH: TableDefinition<DeviceKey, DeviceHealthRecord> =
    TableDefinition::new("device_health");

/// Every table name of schema version 3, `meta` included.
pub const TABLE_NAMES: [&str; 9] = [
    "meta",
    "devices",
    "allocations",
    "intents",
    "pending_intents",
    "claim_intents",
    "audit",
    "admin_access",
    "device_health",
];

/// The step from version 2: creates the empty `device_health` table (every device healthy). No
/// existing record changes.
pub(crate) fn from_v2(txn: &redb::WriteTransaction) -> Result<(), crate::migrate::StepError> {
    txn.open_table(DEVICE_HEALTH)?;
    Ok(())
}
