//! Schema version 4, frozen as released: every table of version 3 ([`crate::v3`]) unchanged,
//! plus the `history` table (holder intervals and device events by sequence number) and its
//! per-device index `history_devices`, with raw-bytes stand-ins for their types.
//!
//! Nothing here may change once released: a stored table name, type name or record layout is part
//! of the file format. The allocator's `ledger::tables` and `ledger::records` must produce exactly
//! these names and layouts (checked by its tests).

use redb::{ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::v1::{self, raw_type};

raw_type!(
    /// A history sequence number, a big-endian `u64`.
    HistorySeq, "dra_ledger::HistorySeq@v1", Some(8)
);
raw_type!(
    /// `node 0x00 device 0x00 big-endian u64 history sequence number`, ordered bytewise.
    HistoryDeviceKey, "dra_ledger::HistoryDeviceKey@v1", None
);
raw_type!(
    /// Postcard bytes of a history record.
    HistoryRecord, "dra_ledger::HistoryRecord@v1", None
);

/// Holder intervals and device events keyed by a sequence number that only grows.
pub const HISTORY: TableDefinition<HistorySeq, HistoryRecord> = TableDefinition::new("history");

/// Index of [`HISTORY`] by device: one key per history record, no value.
pub const HISTORY_DEVICES: TableDefinition<HistoryDeviceKey, ()> =
    TableDefinition::new("history_devices");

/// Every table name of schema version 4, `meta` included.
pub const TABLE_NAMES: [&str; 11] = [
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
];

/// The frozen layout of `dra_ledger::AllocationRecord@v1`, as the step reads it.
#[derive(Deserialize)]
struct AllocationV1 {
    namespace: String,
    name: String,
    _pod_uid: Option<String>,
    node: String,
    devices: Vec<String>,
    _sharing: SharingV1,
    _request_fingerprint: Option<u64>,
    _state: StateV1,
    _intent: u64,
    created_ms: u64,
    _updated_ms: u64,
}

/// The frozen layout of `StoredSharing`.
#[derive(Deserialize)]
enum SharingV1 {
    Exclusive,
    Shared { _max_consumers: u32 },
}

/// The frozen layout of the stored allocation state.
#[derive(Deserialize)]
enum StateV1 {
    Pending,
    Confirmed,
}

/// The frozen layout of `dra_ledger::HistoryRecord@v1`, as the step writes it: only the holder
/// variant, the first one.
#[derive(Serialize)]
struct HistoryV1<'a> {
    node: &'a str,
    device: &'a str,
    entry: EntryV1<'a>,
}

#[derive(Serialize)]
enum EntryV1<'a> {
    Held {
        claim_uid: &'a str,
        namespace: &'a str,
        name: &'a str,
        from_ms: u64,
        to_ms: Option<u64>,
        share_permille: Option<u32>,
    },
}

/// The key of history record `seq` in [`HISTORY_DEVICES`].
fn device_key(node: &str, device: &str, seq: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(node.len() + device.len() + 10);
    key.extend_from_slice(node.as_bytes());
    key.push(0);
    key.extend_from_slice(device.as_bytes());
    key.push(0);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The step from version 3: creates the history tables and opens one holder interval per device
/// of every current allocation, from the allocation's creation time, by claim UID. No existing
/// record changes.
pub(crate) fn from_v3(txn: &redb::WriteTransaction) -> Result<(), crate::migrate::StepError> {
    let allocations = txn.open_table(v1::ALLOCATIONS)?;
    let mut history = txn.open_table(HISTORY)?;
    let mut by_device = txn.open_table(HISTORY_DEVICES)?;
    let mut seq = 1_u64;
    for entry in allocations.iter()? {
        let (key, value) = entry?;
        let uid = String::from_utf8_lossy(key.value()).into_owned();
        let record: AllocationV1 = postcard::from_bytes(value.value())
            .map_err(|error| format!("allocation {uid} does not decode: {error}"))?;
        for device in &record.devices {
            let interval = HistoryV1 {
                node: &record.node,
                device,
                entry: EntryV1::Held {
                    claim_uid: &uid,
                    namespace: &record.namespace,
                    name: &record.name,
                    from_ms: record.created_ms,
                    to_ms: None,
                    share_permille: None,
                },
            };
            let bytes = postcard::to_allocvec(&interval)?;
            history.insert(seq.to_be_bytes().as_slice(), bytes.as_slice())?;
            by_device.insert(device_key(&record.node, device, seq).as_slice(), ())?;
            seq += 1;
        }
    }
    Ok(())
}
