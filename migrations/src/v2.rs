//! Schema version 2, frozen as released: every table of version 1 ([`crate::v1`]) unchanged, plus
//! the `admin_access` table, with a raw-bytes stand-in for its value type.
//!
//! Nothing here may change once released: a stored table name or type name is part of the file
//! format. The allocator's `ledger::tables` must produce exactly these names (checked by its
//! tests).

use redb::TableDefinition;

use crate::v1::ClaimUid;

crate::v1::raw_type!(
    /// Postcard bytes of an admin-access record.
    AdminAccessRecord, "dra_ledger::AdminAccessRecord@v1", None
);

/// Admin-access claims keyed by claim UID: who looks at which devices, apart from allocations.
pub const ADMIN_ACCESS: TableDefinition<ClaimUid, AdminAccessRecord> =
    TableDefinition::new("admin_access");

/// Every table name of schema version 2, `meta` included.
pub const TABLE_NAMES: [&str; 8] = [
    "meta",
    "devices",
    "allocations",
    "intents",
    "pending_intents",
    "claim_intents",
    "audit",
    "admin_access",
];

/// The step from version 1: creates the empty `admin_access` table. No existing record changes.
pub(crate) fn from_v1(txn: &redb::WriteTransaction) -> Result<(), crate::migrate::StepError> {
    txn.open_table(ADMIN_ACCESS)?;
    Ok(())
}
