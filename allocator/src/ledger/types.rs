//! The ledger's public request and view types (what the controller and the admin API use).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use super::records::{AllocationState, AuditEvent, IntentKind, Resolution};
use crate::model::{Attributes, EffectiveRequest, Sharing};

/// Identifies a claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClaimRef {
    /// The claim UID (the ledger's key).
    pub uid: String,
    /// The claim namespace.
    pub namespace: String,
    /// The claim name.
    pub name: String,
}

impl ClaimRef {
    /// A claim reference.
    pub fn new(
        uid: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ClaimRef {
            uid: uid.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// One claim to allocate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocateRequest {
    /// The claim.
    pub claim: ClaimRef,
    /// The pod the allocation is for (delayed allocation), if any.
    pub pod_uid: Option<String>,
    /// What the claim asks for, its class applied.
    pub request: EffectiveRequest,
    /// The node to allocate on, or `None` for the best node by the request's policy.
    pub node: Option<String>,
}

/// One claim of a pod to allocate together with the pod's other claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaimRequest {
    /// The claim.
    pub claim: ClaimRef,
    /// What the claim asks for, its class applied.
    pub request: EffectiveRequest,
}

/// An allocation known from the cluster, recorded as confirmed (ledger rebuild).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRequest {
    /// The claim.
    pub claim: ClaimRef,
    /// The pod, if known.
    pub pod_uid: Option<String>,
    /// The node of the allocation.
    pub node: String,
    /// The devices of the allocation.
    pub devices: Vec<String>,
    /// How the claim holds them.
    pub sharing: Sharing,
    /// The fraction of its physical unit (a GPU) the claim holds of each device where it holds
    /// less than all of it (a partition, a share of a multi-allocation device), in thousandths
    /// (see [`crate::capacity`]); devices not named count whole. Kept in the devices' history.
    pub share_permille: std::collections::BTreeMap<String, u32>,
}

/// Whether two placements are the same: the same node and the same set of device names (their
/// order and repeats aside).
///
/// ```
/// use dra_allocator::ledger::same_placement;
///
/// let held = ["gpu-1".to_owned(), "gpu-0".to_owned()];
/// let shown = ["gpu-0".to_owned(), "gpu-1".to_owned()];
/// assert!(same_placement("node-a", &held, "node-a", &shown));
/// assert!(!same_placement("node-a", &held, "node-b", &shown));
/// assert!(!same_placement("node-a", &held, "node-a", &shown[..1]));
/// ```
pub fn same_placement(
    node: &str,
    devices: &[String],
    other_node: &str,
    other_devices: &[String],
) -> bool {
    fn set(devices: &[String]) -> BTreeSet<&str> {
        devices.iter().map(String::as_str).collect()
    }
    node == other_node && set(devices) == set(other_devices)
}

/// The allocation of one claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// The claim.
    pub claim: ClaimRef,
    /// The pod it was made for, if any.
    pub pod_uid: Option<String>,
    /// The node holding the devices.
    pub node: String,
    /// Device names on the node.
    pub devices: Vec<String>,
    /// How the claim holds them.
    pub sharing: Sharing,
    /// Pending until the cluster is seen to carry it.
    pub state: AllocationState,
    /// The intent that created it.
    pub intent: u64,
    /// Unix milliseconds of creation.
    pub created_ms: u64,
    /// Unix milliseconds of the last change.
    pub updated_ms: u64,
}

/// One page of allocations ordered by claim UID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocationQuery {
    /// Only claims with a UID greater than this (the previous page's `next`).
    pub after: Option<String>,
    /// At most this many (0 means 100).
    pub limit: usize,
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only this node.
    pub node: Option<String>,
}

/// A page of allocations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationPage {
    /// The allocations, by claim UID.
    pub items: Vec<Allocation>,
    /// The UID to pass as `after` for the next page; `None` on the last page.
    pub next: Option<String>,
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// The intent id.
    pub id: u64,
    /// The claim UID.
    pub claim_uid: String,
    /// What it journals.
    pub kind: IntentKind,
    /// The node.
    pub node: String,
    /// The devices.
    pub devices: Vec<String>,
    /// Unix milliseconds.
    pub at_ms: u64,
    /// How and when an allocate intent ended; `None` while open (and for other kinds).
    pub resolution: Option<(Resolution, u64)>,
}

/// A claim as the ledger knows it: its allocation, if any, and its intent history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimDetail {
    /// The current allocation.
    pub allocation: Option<Allocation>,
    /// The claim's journalled intents, oldest first (within the retention bound).
    pub intents: Vec<Intent>,
}

/// An allocation whose intent is durable but not yet seen in the cluster; the controller
/// resolves it by confirming, or by aborting/releasing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingIntent {
    /// The intent id.
    pub intent: u64,
    /// The claim.
    pub claim: ClaimRef,
    /// The pod, if any.
    pub pod_uid: Option<String>,
    /// The node.
    pub node: String,
    /// The reserved devices.
    pub devices: Vec<String>,
    /// Unix milliseconds when the intent was written.
    pub created_ms: u64,
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Sequence number; only grows.
    pub seq: u64,
    /// Unix milliseconds.
    pub at_ms: u64,
    /// What happened.
    pub event: AuditEvent,
}

/// A claim holding a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceConsumer {
    /// The claim UID.
    pub claim_uid: String,
    /// How the claim holds the device.
    pub sharing: Sharing,
}

/// One device with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceStatus {
    /// The device name.
    pub name: String,
    /// Its attributes.
    pub attributes: Attributes,
    /// Out of allocation by an operator.
    pub cordoned: bool,
    /// No longer published while allocated.
    pub missing: bool,
    /// The claims holding it.
    pub consumers: Vec<DeviceConsumer>,
    /// The UIDs of the admin-access claims looking at it (holding nothing).
    #[serde(default)]
    pub admin_access: Vec<String>,
    /// Why and since when it is unhealthy; `None` when healthy.
    #[serde(default)]
    pub health: Option<super::health::DeviceHealth>,
}

/// Device counts by state. A device counts once in `free`/`allocated`, and additionally in
/// `shared`, `cordoned` and `missing` when those apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCounts {
    /// All devices.
    pub total: u64,
    /// Devices with no consumer, not cordoned and not missing.
    pub free: u64,
    /// Devices with at least one consumer.
    pub allocated: u64,
    /// Devices held by shared consumers.
    pub shared: u64,
    /// Cordoned devices.
    pub cordoned: u64,
    /// Missing devices.
    pub missing: u64,
}

impl DeviceCounts {
    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &DeviceCounts) {
        self.total += other.total;
        self.free += other.free;
        self.allocated += other.allocated;
        self.shared += other.shared;
        self.cordoned += other.cordoned;
        self.missing += other.missing;
    }
}

/// One node's device counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// The node.
    pub node: String,
    /// Its counts.
    pub counts: DeviceCounts,
    /// Admin-access claims on its devices (not counted in `counts`).
    #[serde(default)]
    pub admin_access: u64,
    /// Unhealthy devices (each also counted in `counts` by its state).
    #[serde(default)]
    pub unhealthy: u64,
    /// Unhealthy devices that a claim holds (part of `unhealthy`).
    #[serde(default)]
    pub unhealthy_allocated: u64,
}

/// Utilisation totals and per attribute value (`model` -> `H200` -> counts).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Utilisation {
    /// All devices.
    pub totals: DeviceCounts,
    /// Per attribute name, per value as text.
    pub by_attribute: BTreeMap<String, BTreeMap<String, DeviceCounts>>,
    /// Claims with an allocation.
    pub claims_allocated: u64,
    /// Allocations still pending confirmation.
    pub intents_pending: u64,
}

/// What an inventory update changed on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryChange {
    /// Devices newly recorded.
    pub added: Vec<String>,
    /// Devices whose attributes changed.
    pub updated: Vec<String>,
    /// Free devices no longer published, deleted.
    pub removed: Vec<String>,
    /// Allocated devices no longer published, now marked missing.
    pub marked_missing: Vec<String>,
    /// Missing devices published again.
    pub restored: Vec<String>,
}

/// The result of [`super::Ledger::verify`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Devices checked.
    pub devices: u64,
    /// Allocations checked.
    pub allocations: u64,
    /// Journal entries checked.
    pub intents: u64,
    /// Audit entries checked.
    pub audit_entries: u64,
    /// Admin-access records checked.
    #[serde(default)]
    pub admin_access: u64,
    /// Device health records checked.
    #[serde(default)]
    pub health: u64,
    /// History records (holder intervals and device events) checked.
    #[serde(default)]
    pub history: u64,
    /// Every broken invariant found, one sentence each; empty when consistent.
    pub problems: Vec<String>,
}

impl VerifyReport {
    /// Whether no problem was found.
    pub fn is_consistent(&self) -> bool {
        self.problems.is_empty()
    }
}
