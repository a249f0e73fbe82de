//! Schema version 1, frozen as released: table names and stored type names, with raw-bytes
//! stand-ins for the allocator's key and value types.
//!
//! A future migration step from version 1 opens these definitions and decodes the bytes with its
//! own frozen copies of the records. Nothing here may change once released: a stored table name or
//! type name is part of the file format. The allocator's `ledger::tables` must produce exactly these
//! names (checked by its tests).

use redb::TableDefinition;

/// Declares a raw-bytes stand-in for a stored key or value type of a frozen schema version.
macro_rules! raw_type {
    ($(#[$doc:meta])* $name:ident, $type_name:literal, $width:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub enum $name {}

        impl redb::Value for $name {
            type SelfType<'a> = &'a [u8];
            type AsBytes<'a> = &'a [u8];

            fn fixed_width() -> Option<usize> {
                $width
            }

            fn from_bytes<'a>(data: &'a [u8]) -> &'a [u8]
            where
                Self: 'a,
            {
                data
            }

            fn as_bytes<'a, 'b: 'a>(value: &'a &'b [u8]) -> &'a [u8]
            where
                Self: 'b,
            {
                value
            }

            fn type_name() -> redb::TypeName {
                redb::TypeName::new($type_name)
            }
        }

        impl redb::Key for $name {
            fn compare(data1: &[u8], data2: &[u8]) -> std::cmp::Ordering {
                data1.cmp(data2)
            }
        }
    };
}
pub(crate) use raw_type;

raw_type!(
    /// `node 0x00 device`, ordered bytewise.
    DeviceKey, "dra_ledger::DeviceKey@v1", None
);
raw_type!(
    /// The claim UID as UTF-8, ordered bytewise.
    ClaimUid, "dra_ledger::ClaimUid@v1", None
);
raw_type!(
    /// An intent id, a big-endian `u64`.
    IntentId, "dra_ledger::IntentId@v1", Some(8)
);
raw_type!(
    /// An audit sequence number, a big-endian `u64`.
    AuditSeq, "dra_ledger::AuditSeq@v1", Some(8)
);
raw_type!(
    /// `claim uid 0x00 big-endian u64 intent id`, ordered bytewise.
    ClaimIntentKey, "dra_ledger::ClaimIntentKey@v1", None
);
raw_type!(
    /// Postcard bytes of a device record.
    DeviceRecord, "dra_ledger::DeviceRecord@v1", None
);
raw_type!(
    /// Postcard bytes of an allocation record.
    AllocationRecord, "dra_ledger::AllocationRecord@v1", None
);
raw_type!(
    /// Postcard bytes of an intent record.
    IntentRecord, "dra_ledger::IntentRecord@v1", None
);
raw_type!(
    /// Postcard bytes of an audit record.
    AuditRecord, "dra_ledger::AuditRecord@v1", None
);

/// Devices per node.
pub const DEVICES: TableDefinition<DeviceKey, DeviceRecord> = TableDefinition::new("devices");
/// Allocations keyed by claim UID.
pub const ALLOCATIONS: TableDefinition<ClaimUid, AllocationRecord> =
    TableDefinition::new("allocations");
/// The intent journal keyed by intent id.
pub const INTENTS: TableDefinition<IntentId, IntentRecord> = TableDefinition::new("intents");
/// Index: claim UID to the id of its open allocate intent.
pub const PENDING_INTENTS: TableDefinition<ClaimUid, IntentId> =
    TableDefinition::new("pending_intents");
/// Index: (claim UID, intent id) of every journalled intent.
pub const CLAIM_INTENTS: TableDefinition<ClaimIntentKey, ()> =
    TableDefinition::new("claim_intents");
/// The audit log keyed by sequence number.
pub const AUDIT: TableDefinition<AuditSeq, AuditRecord> = TableDefinition::new("audit");

/// Every table name of schema version 1, `meta` included.
pub const TABLE_NAMES: [&str; 7] = [
    "meta",
    "devices",
    "allocations",
    "intents",
    "pending_intents",
    "claim_intents",
    "audit",
];
