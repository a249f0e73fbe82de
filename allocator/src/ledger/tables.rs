//! Every table of the ledger file, its typed keys and the postcard codec of its values.
//!
//! Stored table names and type names are file format: they are never renamed (a changed table gets
//! a `_v2` name and a migration in `dra-migrations`). The names here must equal the frozen schema
//! copies in `dra_migrations::v1` to `v5`; tests compare them. Owns no ledger logic.

use std::cmp::Ordering;
use std::fmt::Debug;
use std::marker::PhantomData;

use redb::{Key, TableDefinition, TypeName, Value};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::history::HistoryRecord;
use super::records::{
    AdminAccessRecord, AllocationRecord, AuditRecord, DeviceHealthRecord, DeviceRecord,
    IntentRecord,
};
use crate::usage::hours::HourRecord;

/// Schema version and driver name. Invariant: written in the file's first transaction; format
/// frozen forever (see `dra_migrations::META`), so any release can read any file's version.
pub const META: TableDefinition<&str, &[u8]> = dra_migrations::META;

/// Devices per node. Invariant: `consumers` of a record lists exactly the claims whose allocation
/// names this device; an exclusive consumer is alone; shared consumers never exceed the smallest
/// `max_consumers` among them; a `missing` device always has consumers (one without is deleted).
pub const DEVICES: TableDefinition<DeviceKey, Stored<DeviceRecord>> =
    TableDefinition::new("devices");

/// Allocations keyed by claim UID. Invariant: every named device exists under the allocation's
/// node and lists the claim as consumer; a `Pending` allocation has an entry in
/// [`PENDING_INTENTS`], a `Confirmed` one has none.
pub const ALLOCATIONS: TableDefinition<ClaimUid, Stored<AllocationRecord>> =
    TableDefinition::new("allocations");

/// The intent journal keyed by a monotonically increasing id. Invariant: ids are never reused;
/// an `Allocate` intent without resolution is open and indexed in [`PENDING_INTENTS`]; only
/// resolved intents are pruned (oldest first, beyond the retention bound).
pub const INTENTS: TableDefinition<IntentId, Stored<IntentRecord>> =
    TableDefinition::new("intents");

/// Index of open allocate intents by claim UID. Invariant: agrees exactly with the unresolved
/// `Allocate` intents of [`INTENTS`] and with the `Pending` allocations.
pub const PENDING_INTENTS: TableDefinition<ClaimUid, IntentId> =
    TableDefinition::new("pending_intents");

/// Index of every journalled intent by (claim UID, intent id). Invariant: one entry per record of
/// [`INTENTS`], with that record's claim UID; removed together with the record.
pub const CLAIM_INTENTS: TableDefinition<ClaimIntentKey, ()> =
    TableDefinition::new("claim_intents");

/// The append-only audit log. Invariant: sequence numbers only grow; entries are never changed,
/// only the oldest are pruned beyond the retention bound.
pub const AUDIT: TableDefinition<AuditSeq, Stored<AuditRecord>> = TableDefinition::new("audit");

/// Admin-access claims keyed by claim UID (schema version 2). Invariant: every named device
/// exists under the record's node; the record is no consumer of it (admin access takes no device
/// from anyone), and a device is not kept (as missing) for an admin-access claim.
pub const ADMIN_ACCESS: TableDefinition<ClaimUid, Stored<AdminAccessRecord>> =
    TableDefinition::new("admin_access");

/// The unhealthy devices (schema version 3), keyed like [`DEVICES`]. Invariant: every entry's
/// device is in [`DEVICES`]; a device without an entry is healthy.
pub const DEVICE_HEALTH: TableDefinition<DeviceKey, Stored<DeviceHealthRecord>> =
    TableDefinition::new("device_health");

/// Holder intervals and device events (schema version 4) by a sequence number that only grows.
/// Invariant: one entry of [`HISTORY_DEVICES`] per record, under the record's device; a device
/// holder has at most one open interval (no end) per claim, and only while the claim's allocation
/// names the device; closed intervals and events are pruned by age.
pub const HISTORY: TableDefinition<HistorySeq, Stored<HistoryRecord>> =
    TableDefinition::new("history");

/// Index of [`HISTORY`] by device (schema version 4). Invariant: agrees exactly with it.
pub const HISTORY_DEVICES: TableDefinition<HistoryDeviceKey, ()> =
    TableDefinition::new("history_devices");

/// Hourly totals of rolled-up holder intervals (schema version 5) per hour, namespace, node and
/// model, by hour first. Invariant: every interval counts either here (once rolled up, its
/// history entries are gone) or in [`HISTORY`], never in both; hours are pruned by age.
pub const HISTORY_HOURS: TableDefinition<HistoryHourKey, Stored<HourRecord>> =
    TableDefinition::new("history_hours");

/// Creates every table that does not exist yet (a new or just-migrated file).
pub(crate) fn create_all(txn: &redb::WriteTransaction) -> super::Result<()> {
    let storage = super::LedgerError::storage;
    txn.open_table(META).map_err(storage)?;
    txn.open_table(DEVICES).map_err(storage)?;
    txn.open_table(ALLOCATIONS).map_err(storage)?;
    txn.open_table(INTENTS).map_err(storage)?;
    txn.open_table(PENDING_INTENTS).map_err(storage)?;
    txn.open_table(CLAIM_INTENTS).map_err(storage)?;
    txn.open_table(AUDIT).map_err(storage)?;
    txn.open_table(ADMIN_ACCESS).map_err(storage)?;
    txn.open_table(DEVICE_HEALTH).map_err(storage)?;
    txn.open_table(HISTORY).map_err(storage)?;
    txn.open_table(HISTORY_DEVICES).map_err(storage)?;
    txn.open_table(HISTORY_HOURS).map_err(storage)?;
    Ok(())
}

/// A record type stored with postcard; `TYPE_NAME` carries its format version.
pub trait Record: Serialize + DeserializeOwned + Debug {
    /// The stored type name, e.g. `dra_ledger::DeviceRecord@v1`.
    const TYPE_NAME: &'static str;
}

/// A stored value that failed to decode: the raw bytes (kept so the codec round-trips) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable {
    /// The stored bytes.
    pub bytes: Vec<u8>,
    /// The postcard error.
    pub reason: String,
}

/// Bytes reserved for encoding one record (most are 40-200 bytes).
const ENCODE_CAPACITY: usize = 256;

/// The redb value type of a postcard-encoded [`Record`]. Decoding never panics: a value that does
/// not decode reads as `Err(Undecodable)`.
#[derive(Debug)]
pub struct Stored<T>(PhantomData<T>);

impl<T: Record> Value for Stored<T> {
    type SelfType<'a>
        = Result<T, Undecodable>
    where
        Self: 'a;
    type AsBytes<'a>
        = Vec<u8>
    where
        Self: 'a;

    fn fixed_width() -> Option<usize> {
        None
    }

    fn from_bytes<'a>(data: &'a [u8]) -> Self::SelfType<'a>
    where
        Self: 'a,
    {
        postcard::from_bytes(data).map_err(|error| Undecodable {
            bytes: data.to_vec(),
            reason: error.to_string(),
        })
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a Self::SelfType<'b>) -> Vec<u8>
    where
        Self: 'b,
    {
        match value {
            // Sized for a typical record, so that encoding rarely grows the buffer.
            Ok(record) => postcard::to_extend(record, Vec::with_capacity(ENCODE_CAPACITY))
                .expect("postcard encoding of a ledger record into memory cannot fail"),
            Err(undecodable) => undecodable.bytes.clone(),
        }
    }

    fn type_name() -> TypeName {
        TypeName::new(T::TYPE_NAME)
    }
}

/// Implements `Value` and bytewise-ordered `Key` for a key newtype over its byte encoding.
macro_rules! bytes_key {
    ($name:ident, $type_name:literal) => {
        impl Value for $name {
            type SelfType<'a> = $name;
            type AsBytes<'a> = &'a [u8];

            fn fixed_width() -> Option<usize> {
                None
            }

            fn from_bytes<'a>(data: &'a [u8]) -> $name
            where
                Self: 'a,
            {
                $name(data.to_vec())
            }

            fn as_bytes<'a, 'b: 'a>(value: &'a $name) -> &'a [u8]
            where
                Self: 'b,
            {
                &value.0
            }

            fn type_name() -> TypeName {
                TypeName::new($type_name)
            }
        }

        impl Key for $name {
            fn compare(data1: &[u8], data2: &[u8]) -> Ordering {
                data1.cmp(data2)
            }
        }
    };
}

/// Implements `Value` and `Key` for a `u64` sequence newtype stored big-endian.
macro_rules! sequence_key {
    ($name:ident, $type_name:literal) => {
        impl Value for $name {
            type SelfType<'a> = $name;
            type AsBytes<'a> = [u8; 8];

            fn fixed_width() -> Option<usize> {
                Some(8)
            }

            fn from_bytes<'a>(data: &'a [u8]) -> $name
            where
                Self: 'a,
            {
                let mut bytes = [0u8; 8];
                let n = data.len().min(8);
                bytes[..n].copy_from_slice(&data[..n]);
                $name(u64::from_be_bytes(bytes))
            }

            fn as_bytes<'a, 'b: 'a>(value: &'a $name) -> [u8; 8]
            where
                Self: 'b,
            {
                value.0.to_be_bytes()
            }

            fn type_name() -> TypeName {
                TypeName::new($type_name)
            }
        }

        impl Key for $name {
            fn compare(data1: &[u8], data2: &[u8]) -> Ordering {
                data1.cmp(data2)
            }
        }
    };
}

/// A device key: node name, a zero byte, device name; so one node's devices are one key range.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeviceKey(Vec<u8>);

impl DeviceKey {
    /// The key of `device` on `node`.
    pub fn new(node: &str, device: &str) -> Self {
        let mut bytes = Vec::with_capacity(node.len() + device.len() + 1);
        bytes.extend_from_slice(node.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(device.as_bytes());
        DeviceKey(bytes)
    }

    /// The smallest key of `node`.
    pub fn node_start(node: &str) -> Self {
        Self::new(node, "")
    }

    /// A key above every key of `node` and below every key of the next node.
    pub fn node_end(node: &str) -> Self {
        let mut bytes = node.as_bytes().to_vec();
        bytes.push(1);
        DeviceKey(bytes)
    }

    /// The node and device names (lossy for bytes that are not UTF-8).
    pub fn parts(&self) -> (String, String) {
        let split = self.0.iter().position(|b| *b == 0).unwrap_or(self.0.len());
        let node = String::from_utf8_lossy(&self.0[..split]).into_owned();
        let device = self
            .0
            .get(split + 1..)
            .map(|rest| String::from_utf8_lossy(rest).into_owned())
            .unwrap_or_default();
        (node, device)
    }
}

bytes_key!(DeviceKey, "dra_ledger::DeviceKey@v1");

/// A claim UID as stored: its UTF-8 bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClaimUid(Vec<u8>);

impl ClaimUid {
    /// The key of claim `uid`.
    pub fn new(uid: &str) -> Self {
        ClaimUid(uid.as_bytes().to_vec())
    }

    /// The UID text (lossy for bytes that are not UTF-8).
    pub fn as_string(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

bytes_key!(ClaimUid, "dra_ledger::ClaimUid@v1");

/// Claim UID, a zero byte, then the big-endian intent id: one claim's intents are one key range.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClaimIntentKey(Vec<u8>);

impl ClaimIntentKey {
    /// The key of intent `id` of claim `uid`.
    pub fn new(uid: &str, id: IntentId) -> Self {
        let mut bytes = Vec::with_capacity(uid.len() + 9);
        bytes.extend_from_slice(uid.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&id.0.to_be_bytes());
        ClaimIntentKey(bytes)
    }

    /// The smallest key of claim `uid`.
    pub fn claim_start(uid: &str) -> Self {
        Self::new(uid, IntentId(0))
    }

    /// The largest key of claim `uid`.
    pub fn claim_end(uid: &str) -> Self {
        Self::new(uid, IntentId(u64::MAX))
    }

    /// The intent id part.
    pub fn intent(&self) -> IntentId {
        let tail = self.0.len().saturating_sub(8);
        <IntentId as Value>::from_bytes(&self.0[tail..])
    }
}

bytes_key!(ClaimIntentKey, "dra_ledger::ClaimIntentKey@v1");

/// The id of an intent in the journal; ids only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IntentId(pub u64);

sequence_key!(IntentId, "dra_ledger::IntentId@v1");

/// The sequence number of an audit entry; numbers only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuditSeq(pub u64);

sequence_key!(AuditSeq, "dra_ledger::AuditSeq@v1");

/// The sequence number of a history record; numbers only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HistorySeq(pub u64);

sequence_key!(HistorySeq, "dra_ledger::HistorySeq@v1");

/// Node, a zero byte, device, a zero byte, the big-endian history sequence number: one device's
/// history is one key range, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HistoryDeviceKey(Vec<u8>);

impl HistoryDeviceKey {
    /// The key of history record `seq` of `device` on `node`.
    pub fn new(node: &str, device: &str, seq: HistorySeq) -> Self {
        let mut bytes = DeviceKey::new(node, device).0;
        bytes.push(0);
        bytes.extend_from_slice(&seq.0.to_be_bytes());
        HistoryDeviceKey(bytes)
    }

    /// Every key of `device` on `node`, oldest first.
    pub fn device_range(node: &str, device: &str) -> std::ops::RangeInclusive<Self> {
        Self::new(node, device, HistorySeq(0))..=Self::new(node, device, HistorySeq(u64::MAX))
    }

    /// The sequence number part.
    pub fn seq(&self) -> HistorySeq {
        let tail = self.0.len().saturating_sub(8);
        <HistorySeq as Value>::from_bytes(&self.0[tail..])
    }
}

bytes_key!(HistoryDeviceKey, "dra_ledger::HistoryDeviceKey@v1");

impl Record for HourRecord {
    const TYPE_NAME: &'static str = "dra_ledger::HistoryHourRecord@v1";
}

/// The big-endian hour start (unix milliseconds), then namespace, a zero byte, node, a zero
/// byte, model (empty without one): one hour's totals are one key range, oldest hour first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HistoryHourKey(Vec<u8>);

impl HistoryHourKey {
    /// The key of the totals of `hour_ms` for `namespace`, `node` and `model`.
    pub fn new(hour_ms: u64, namespace: &str, node: &str, model: Option<&str>) -> Self {
        let model = model.unwrap_or_default();
        let mut bytes = Vec::with_capacity(10 + namespace.len() + node.len() + model.len());
        bytes.extend_from_slice(&hour_ms.to_be_bytes());
        bytes.extend_from_slice(namespace.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(node.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(model.as_bytes());
        HistoryHourKey(bytes)
    }

    /// A key below every key of `hour_ms` and above every key of earlier hours.
    pub fn hour_start(hour_ms: u64) -> Self {
        HistoryHourKey(hour_ms.to_be_bytes().to_vec())
    }

    /// The hour start, namespace, node and model (lossy for bytes that are not UTF-8).
    pub fn parts(&self) -> (u64, String, String, Option<String>) {
        let hour = <HistorySeq as Value>::from_bytes(&self.0[..self.0.len().min(8)]).0;
        let rest = self.0.get(8..).unwrap_or_default();
        let mut fields = rest
            .splitn(3, |b| *b == 0)
            .map(|field| String::from_utf8_lossy(field).into_owned());
        let namespace = fields.next().unwrap_or_default();
        let node = fields.next().unwrap_or_default();
        let model = fields.next().filter(|model| !model.is_empty());
        (hour, namespace, node, model)
    }
}

bytes_key!(HistoryHourKey, "dra_ledger::HistoryHourKey@v1");

#[cfg(test)]
mod tests {
    use dra_migrations::{v1, v2, v3, v4, v5};
    use redb::{TableHandle, Value};

    use super::*;

    fn same<A: Value, B: Value>() {
        assert_eq!(A::type_name(), B::type_name());
        assert_eq!(A::fixed_width(), B::fixed_width());
    }

    #[test]
    fn tables_match_the_frozen_v1_schema() {
        assert_eq!(DEVICES.name(), v1::DEVICES.name());
        assert_eq!(ALLOCATIONS.name(), v1::ALLOCATIONS.name());
        assert_eq!(INTENTS.name(), v1::INTENTS.name());
        assert_eq!(PENDING_INTENTS.name(), v1::PENDING_INTENTS.name());
        assert_eq!(CLAIM_INTENTS.name(), v1::CLAIM_INTENTS.name());
        assert_eq!(AUDIT.name(), v1::AUDIT.name());
        same::<DeviceKey, v1::DeviceKey>();
        same::<ClaimUid, v1::ClaimUid>();
        same::<IntentId, v1::IntentId>();
        same::<AuditSeq, v1::AuditSeq>();
        same::<ClaimIntentKey, v1::ClaimIntentKey>();
        same::<Stored<DeviceRecord>, v1::DeviceRecord>();
        same::<Stored<AllocationRecord>, v1::AllocationRecord>();
        same::<Stored<IntentRecord>, v1::IntentRecord>();
        same::<Stored<AuditRecord>, v1::AuditRecord>();
    }

    #[test]
    fn tables_match_the_frozen_v2_to_v5_schemas() {
        assert_eq!(ADMIN_ACCESS.name(), v2::ADMIN_ACCESS.name());
        same::<Stored<AdminAccessRecord>, v2::AdminAccessRecord>();
        assert_eq!(DEVICE_HEALTH.name(), v3::DEVICE_HEALTH.name());
        same::<Stored<DeviceHealthRecord>, v3::DeviceHealthRecord>();
        assert_eq!(HISTORY.name(), v4::HISTORY.name());
        assert_eq!(HISTORY_DEVICES.name(), v4::HISTORY_DEVICES.name());
        same::<HistorySeq, v4::HistorySeq>();
        same::<HistoryDeviceKey, v4::HistoryDeviceKey>();
        same::<Stored<HistoryRecord>, v4::HistoryRecord>();
        let names = [
            META.name(),
            DEVICES.name(),
            ALLOCATIONS.name(),
            INTENTS.name(),
            PENDING_INTENTS.name(),
            CLAIM_INTENTS.name(),
            AUDIT.name(),
            ADMIN_ACCESS.name(),
            DEVICE_HEALTH.name(),
            HISTORY.name(),
            HISTORY_DEVICES.name(),
        ];
        assert_eq!(names[..8], v2::TABLE_NAMES);
        assert_eq!(names[..9], v3::TABLE_NAMES);
        assert_eq!(names, v4::TABLE_NAMES);
        assert_eq!(HISTORY_HOURS.name(), v5::HISTORY_HOURS.name());
        same::<HistoryHourKey, v5::HistoryHourKey>();
        same::<Stored<HourRecord>, v5::HistoryHourRecord>();
        assert_eq!(names[..], v5::TABLE_NAMES[..11]);
        assert_eq!(v5::TABLE_NAMES[11], HISTORY_HOURS.name());
    }

    #[test]
    fn hour_keys_order_by_hour_first_and_split_back() {
        let key = HistoryHourKey::new(7_200_000, "team-a", "node-a", Some("H100"));
        assert_eq!(
            key.parts(),
            (
                7_200_000,
                "team-a".to_owned(),
                "node-a".to_owned(),
                Some("H100".to_owned())
            )
        );
        let unknown = HistoryHourKey::new(3_600_000, "team-z", "node-z", None);
        assert_eq!(unknown.parts().3, None);
        assert!(unknown < HistoryHourKey::hour_start(7_200_000));
        assert!(HistoryHourKey::hour_start(7_200_000) < key);
        assert!(key < HistoryHourKey::hour_start(10_800_000));
    }

    #[test]
    fn history_keys_order_one_device_by_sequence() {
        let low = HistoryDeviceKey::new("node-a", "gpu-1", HistorySeq(2));
        let high = HistoryDeviceKey::new("node-a", "gpu-1", HistorySeq(256));
        assert!(low < high);
        assert_eq!(high.seq(), HistorySeq(256));
        assert!(high < HistoryDeviceKey::new("node-a", "gpu-10", HistorySeq(0)));
    }

    #[test]
    fn device_keys_group_by_node_and_split_back() {
        let key = DeviceKey::new("node-a", "gpu-1");
        assert_eq!(key.parts(), ("node-a".to_owned(), "gpu-1".to_owned()));
        assert!(DeviceKey::node_start("node-a") <= key);
        assert!(key < DeviceKey::node_end("node-a"));
        assert!(DeviceKey::node_end("node-a") < DeviceKey::node_start("node-a-2"));
        assert!(DeviceKey::new("node", "z") < DeviceKey::node_start("node-a"));
    }

    #[test]
    fn intent_ids_order_numerically_in_claim_keys() {
        let low = ClaimIntentKey::new("uid", IntentId(2));
        let high = ClaimIntentKey::new("uid", IntentId(256));
        assert!(low < high);
        assert_eq!(high.intent(), IntentId(256));
    }

    #[test]
    fn undecodable_value_reads_as_error_and_keeps_its_bytes() {
        let garbage = [0xff_u8, 0xff, 0xff];
        let decoded = <Stored<AuditRecord> as Value>::from_bytes(&garbage);
        let error = decoded.clone().unwrap_err();
        assert_eq!(error.bytes, garbage);
        assert_eq!(<Stored<AuditRecord> as Value>::as_bytes(&decoded), garbage);
    }
}
