//! The stored records of schema versions 1 to 3, encoded with postcard.
//!
//! These are file format: a field is never reordered, renamed in meaning or removed; a change
//! needs a new record type (`...@v2` type name) and a migration step. Stored attribute values
//! and sharing have their own frozen enums, converted to and from the model types here, so the
//! model can evolve without changing the file. Depends only on `crate::model` for conversions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tables::Record;
use crate::model::{AttributeValue, Attributes, ParseError, Quantity, Sharing, Version};

/// A device attribute as stored (quantities and versions as their canonical text).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StoredAttribute {
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A quantity, canonical text.
    Quantity(String),
    /// Free text.
    String(String),
    /// A semantic version, canonical text.
    Version(String),
    /// A list of integers.
    IntSlice(Vec<i64>),
    /// A list of strings.
    StringSlice(Vec<String>),
}

impl From<&AttributeValue> for StoredAttribute {
    fn from(value: &AttributeValue) -> Self {
        match value {
            AttributeValue::Bool(b) => StoredAttribute::Bool(*b),
            AttributeValue::Int(i) => StoredAttribute::Int(*i),
            AttributeValue::Quantity(q) => StoredAttribute::Quantity(q.to_string()),
            AttributeValue::String(s) => StoredAttribute::String(s.clone()),
            AttributeValue::Version(v) => StoredAttribute::Version(v.to_string()),
            AttributeValue::IntSlice(items) => StoredAttribute::IntSlice(items.clone()),
            AttributeValue::StringSlice(items) => StoredAttribute::StringSlice(items.clone()),
        }
    }
}

impl StoredAttribute {
    /// The model value; `Err` names the text that no longer parses.
    pub fn to_model(&self) -> Result<AttributeValue, ParseError> {
        Ok(match self {
            StoredAttribute::Bool(b) => AttributeValue::Bool(*b),
            StoredAttribute::Int(i) => AttributeValue::Int(*i),
            StoredAttribute::Quantity(text) => AttributeValue::Quantity(Quantity::parse(text)?),
            StoredAttribute::String(s) => AttributeValue::String(s.clone()),
            StoredAttribute::Version(text) => AttributeValue::Version(Version::parse(text)?),
            StoredAttribute::IntSlice(items) => AttributeValue::IntSlice(items.clone()),
            StoredAttribute::StringSlice(items) => AttributeValue::StringSlice(items.clone()),
        })
    }
}

/// Stores model attributes.
pub fn store_attributes(attributes: &Attributes) -> BTreeMap<String, StoredAttribute> {
    attributes
        .iter()
        .map(|(name, value)| (name.clone(), StoredAttribute::from(value)))
        .collect()
}

/// Device sharing as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredSharing {
    /// One claim holds the device.
    Exclusive,
    /// Up to `max_consumers` claims hold the device.
    Shared {
        /// The bound.
        max_consumers: u32,
    },
}

impl From<Sharing> for StoredSharing {
    fn from(sharing: Sharing) -> Self {
        match sharing {
            Sharing::Exclusive => StoredSharing::Exclusive,
            Sharing::Shared { max_consumers } => StoredSharing::Shared { max_consumers },
        }
    }
}

impl From<StoredSharing> for Sharing {
    fn from(sharing: StoredSharing) -> Self {
        match sharing {
            StoredSharing::Exclusive => Sharing::Exclusive,
            StoredSharing::Shared { max_consumers } => Sharing::Shared { max_consumers },
        }
    }
}

/// A claim holding a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumer {
    /// The claim UID.
    pub claim_uid: String,
    /// How the claim holds the device.
    pub sharing: StoredSharing,
}

/// One device of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRecord {
    /// Attributes as last published.
    pub attributes: BTreeMap<String, StoredAttribute>,
    /// Taken out of allocation by an operator; consumers keep it.
    pub cordoned: bool,
    /// No longer published while still allocated.
    pub missing: bool,
    /// The claims holding the device, in allocation order.
    pub consumers: Vec<Consumer>,
}

impl Record for DeviceRecord {
    const TYPE_NAME: &'static str = "dra_ledger::DeviceRecord@v1";
}

/// Whether the cluster has been seen to carry an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllocationState {
    /// The intent is durable; the allocation may not have reached the cluster.
    Pending,
    /// The cluster shows the allocation.
    Confirmed,
}

/// The allocation of one claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRecord {
    /// Claim namespace.
    pub namespace: String,
    /// Claim name.
    pub name: String,
    /// The pod the allocation was made for, if any.
    pub pod_uid: Option<String>,
    /// The node holding the devices.
    pub node: String,
    /// Device names on `node`.
    pub devices: Vec<String>,
    /// How the claim holds its devices.
    pub sharing: StoredSharing,
    /// Fingerprint of the request; `None` for an allocation imported from the cluster.
    pub request_fingerprint: Option<u64>,
    /// Pending or confirmed.
    pub state: AllocationState,
    /// The allocate (or import) intent that created it.
    pub intent: u64,
    /// Unix milliseconds of creation.
    pub created_ms: u64,
    /// Unix milliseconds of the last change.
    pub updated_ms: u64,
}

impl Record for AllocationRecord {
    const TYPE_NAME: &'static str = "dra_ledger::AllocationRecord@v1";
}

/// What an intent journals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IntentKind {
    /// Devices reserved for a claim, before the result is published.
    Allocate,
    /// An allocation recorded from the cluster (ledger rebuild).
    Import,
    /// The cluster was seen to carry the allocation.
    Confirm,
    /// The claim's devices were freed.
    Release,
    /// An allocation that never reached the cluster was dropped.
    Abort,
}

/// How an allocate intent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resolution {
    /// The allocation was confirmed.
    Confirmed,
    /// The claim was released before confirmation.
    Released,
    /// The allocation was aborted.
    Aborted,
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentRecord {
    /// The claim UID.
    pub claim_uid: String,
    /// What happened.
    pub kind: IntentKind,
    /// The node concerned.
    pub node: String,
    /// The devices concerned.
    pub devices: Vec<String>,
    /// Unix milliseconds.
    pub at_ms: u64,
    /// For `Allocate`: how and when it ended; `None` while open. Other kinds are born resolved.
    pub resolution: Option<(Resolution, u64)>,
}

impl IntentRecord {
    /// Whether this is an allocate intent not yet resolved.
    pub fn is_open(&self) -> bool {
        self.kind == IntentKind::Allocate && self.resolution.is_none()
    }
}

impl Record for IntentRecord {
    const TYPE_NAME: &'static str = "dra_ledger::IntentRecord@v1";
}

/// What the audit log records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuditEvent {
    /// Devices reserved for a claim.
    Allocated {
        /// Claim UID.
        claim_uid: String,
        /// Node.
        node: String,
        /// Devices.
        devices: Vec<String>,
    },
    /// An allocation recorded from the cluster.
    Imported {
        /// Claim UID.
        claim_uid: String,
        /// Node.
        node: String,
        /// Devices.
        devices: Vec<String>,
    },
    /// The cluster carries the allocation.
    Confirmed {
        /// Claim UID.
        claim_uid: String,
    },
    /// Devices freed.
    Released {
        /// Claim UID.
        claim_uid: String,
        /// Node.
        node: String,
        /// Devices.
        devices: Vec<String>,
    },
    /// A never-published allocation dropped.
    Aborted {
        /// Claim UID.
        claim_uid: String,
        /// Node.
        node: String,
        /// Devices.
        devices: Vec<String>,
    },
    /// Taken out of allocation.
    Cordoned {
        /// Node.
        node: String,
        /// Device.
        device: String,
    },
    /// Back into allocation.
    Uncordoned {
        /// Node.
        node: String,
        /// Device.
        device: String,
    },
    /// Newly published.
    DeviceAdded {
        /// Node.
        node: String,
        /// Device.
        device: String,
    },
    /// No longer published and free, so removed.
    DeviceRemoved {
        /// Node.
        node: String,
        /// Device.
        device: String,
    },
    /// No longer published while allocated.
    DeviceMissing {
        /// Node.
        node: String,
        /// Device.
        device: String,
    },
    /// Published again after being missing.
    DeviceRestored {
        /// Node.
        node: String,
        /// Device.
        device: String,
    },
    // Variants below were added in schema version 2. Postcard stores the variant index, so new
    // variants only ever go at the end: entries written by version 1 decode unchanged.
    /// An admin-access claim recorded: it looks at the devices and holds none of them.
    AdminAccessRecorded {
        /// Claim UID.
        claim_uid: String,
        /// Node.
        node: String,
        /// Devices.
        devices: Vec<String>,
    },
    /// An admin-access claim now looks at other devices (or on another node).
    AdminAccessReplaced {
        /// Claim UID.
        claim_uid: String,
        /// Node.
        node: String,
        /// Devices.
        devices: Vec<String>,
    },
    /// An admin-access claim released (deallocated, deleted, or its devices left the inventory).
    AdminAccessReleased {
        /// Claim UID.
        claim_uid: String,
        /// Node.
        node: String,
        /// Devices.
        devices: Vec<String>,
    },
    // Added in schema version 3, at the end for the same reason.
    /// A device's health changed; `None` is healthy.
    DeviceHealthChanged {
        /// Node.
        node: String,
        /// Device.
        device: String,
        /// The health before.
        from: Option<DeviceHealthRecord>,
        /// The health now.
        to: Option<DeviceHealthRecord>,
    },
}

/// An admin-access claim (schema version 2): the devices it looks at, which it takes from no
/// one. Kept apart from allocations: it is no device consumer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminAccessRecord {
    /// Claim namespace.
    pub namespace: String,
    /// Claim name.
    pub name: String,
    /// The node of the devices.
    pub node: String,
    /// Device names on `node`.
    pub devices: Vec<String>,
    /// Unix milliseconds when first recorded.
    pub recorded_ms: u64,
    /// Unix milliseconds of the last change.
    pub updated_ms: u64,
}

impl Record for AdminAccessRecord {
    const TYPE_NAME: &'static str = "dra_ledger::AdminAccessRecord@v1";
}

/// Why and since when a device is unhealthy (schema version 3); a healthy device has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceHealthRecord {
    /// The reason, e.g. `XidCritical` (the value of the device's unhealthy taint).
    pub reason: String,
    /// Unix milliseconds since when (the taint's `timeAdded`).
    pub since_ms: u64,
}

impl Record for DeviceHealthRecord {
    const TYPE_NAME: &'static str = "dra_ledger::DeviceHealthRecord@v1";
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Unix milliseconds.
    pub at_ms: u64,
    /// What happened.
    pub event: AuditEvent,
}

impl Record for AuditRecord {
    const TYPE_NAME: &'static str = "dra_ledger::AuditRecord@v1";
}
