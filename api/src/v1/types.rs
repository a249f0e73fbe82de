//! The JSON shapes of the `/v1` endpoints (camelCase), each mapped from a ledger view. These are
//! the API's contract and the source of the OpenAPI schemas; the ledger's own types stay free to
//! change.

use std::collections::BTreeMap;

use dra_allocator::ledger::{
    Allocation, AllocationState, AuditEntry, AuditEvent, ClaimDetail, DeviceConsumer, DeviceCounts,
    DeviceStatus, Intent, IntentKind, NodeSummary, PendingIntent, Resolution, Utilisation,
};
use dra_allocator::model::Sharing;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Device counts by state. A device counts once in `free` or `allocated`, and additionally in
/// `shared`, `cordoned` and `missing` when those apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
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
    /// Devices no longer published while allocated.
    pub missing: u64,
}

impl From<DeviceCounts> for Counts {
    fn from(c: DeviceCounts) -> Self {
        Counts {
            total: c.total,
            free: c.free,
            allocated: c.allocated,
            shared: c.shared,
            cordoned: c.cordoned,
            missing: c.missing,
        }
    }
}

/// One node's device counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeItem {
    /// The node name.
    pub name: String,
    /// Its device counts.
    pub devices: Counts,
}

/// `GET /v1/nodes`: every node with devices in the ledger, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeList {
    /// The nodes.
    pub items: Vec<NodeItem>,
}

impl From<Vec<NodeSummary>> for NodeList {
    fn from(nodes: Vec<NodeSummary>) -> Self {
        NodeList {
            items: nodes
                .into_iter()
                .map(|n| NodeItem {
                    name: n.node,
                    devices: n.counts.into(),
                })
                .collect(),
        }
    }
}

/// How a claim holds its devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharingView {
    /// `exclusive` or `shared`.
    pub mode: SharingMode,
    /// For `shared`: how many claims may hold one device at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_consumers: Option<u32>,
}

/// Whether a device is held alone or shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum SharingMode {
    /// One claim per device.
    Exclusive,
    /// Up to `maxConsumers` claims per device.
    Shared,
}

impl From<Sharing> for SharingView {
    fn from(sharing: Sharing) -> Self {
        match sharing {
            Sharing::Exclusive => SharingView {
                mode: SharingMode::Exclusive,
                max_consumers: None,
            },
            Sharing::Shared { max_consumers } => SharingView {
                mode: SharingMode::Shared,
                max_consumers: Some(max_consumers),
            },
        }
    }
}

/// A claim holding a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerItem {
    /// The claim UID.
    pub claim_uid: String,
    /// How it holds the device.
    pub sharing: SharingView,
}

impl From<DeviceConsumer> for ConsumerItem {
    fn from(c: DeviceConsumer) -> Self {
        ConsumerItem {
            claim_uid: c.claim_uid,
            sharing: c.sharing.into(),
        }
    }
}

/// The state of a device, the first that applies of `missing`, `cordoned`, `allocated`, `free`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum DeviceState {
    /// No longer published while allocated.
    Missing,
    /// Out of allocation by an operator (existing consumers keep it).
    Cordoned,
    /// Held by at least one claim.
    Allocated,
    /// Available.
    Free,
}

/// One device of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceItem {
    /// The device name on the node.
    pub name: String,
    /// The summary state.
    pub state: DeviceState,
    /// Out of allocation by an operator.
    pub cordoned: bool,
    /// No longer published while allocated.
    pub missing: bool,
    /// Attributes by name, each value as text (`80Gi`, `H200`, `[0, 1]`).
    pub attributes: BTreeMap<String, String>,
    /// The claims holding it, in allocation order.
    pub consumers: Vec<ConsumerItem>,
}

impl From<DeviceStatus> for DeviceItem {
    fn from(d: DeviceStatus) -> Self {
        let state = if d.missing {
            DeviceState::Missing
        } else if d.cordoned {
            DeviceState::Cordoned
        } else if d.consumers.is_empty() {
            DeviceState::Free
        } else {
            DeviceState::Allocated
        };
        DeviceItem {
            name: d.name,
            state,
            cordoned: d.cordoned,
            missing: d.missing,
            attributes: d
                .attributes
                .iter()
                .map(|(name, value)| (name.clone(), value.to_string()))
                .collect(),
            consumers: d.consumers.into_iter().map(Into::into).collect(),
        }
    }
}

/// `GET /v1/nodes/{node}/devices`: the devices of one node, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeviceList {
    /// The node.
    pub node: String,
    /// Its devices.
    pub items: Vec<DeviceItem>,
}

/// Whether the cluster has been seen to carry an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum AllocationPhase {
    /// The intent is durable; the allocation may not have reached the cluster yet.
    Pending,
    /// The cluster shows the allocation.
    Confirmed,
}

impl From<AllocationState> for AllocationPhase {
    fn from(state: AllocationState) -> Self {
        match state {
            AllocationState::Pending => AllocationPhase::Pending,
            AllocationState::Confirmed => AllocationPhase::Confirmed,
        }
    }
}

/// The ledger's allocation of one claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimItem {
    /// The claim UID.
    pub uid: String,
    /// The claim namespace.
    pub namespace: String,
    /// The claim name.
    pub name: String,
    /// The pod the allocation was made for (delayed allocation).
    pub pod_uid: Option<String>,
    /// The node holding the devices.
    pub node: String,
    /// The device names on the node.
    pub devices: Vec<String>,
    /// How the claim holds them.
    pub sharing: SharingView,
    /// Pending or confirmed.
    pub state: AllocationPhase,
    /// The intent that created it.
    pub intent: u64,
    /// Unix milliseconds of creation.
    pub created_ms: u64,
    /// Unix milliseconds of the last change.
    pub updated_ms: u64,
}

impl From<Allocation> for ClaimItem {
    fn from(a: Allocation) -> Self {
        ClaimItem {
            uid: a.claim.uid,
            namespace: a.claim.namespace,
            name: a.claim.name,
            pod_uid: a.pod_uid,
            node: a.node,
            devices: a.devices,
            sharing: a.sharing.into(),
            state: a.state.into(),
            intent: a.intent,
            created_ms: a.created_ms,
            updated_ms: a.updated_ms,
        }
    }
}

/// `GET /v1/claims`: one page of allocations by claim UID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClaimList {
    /// The allocations.
    pub items: Vec<ClaimItem>,
    /// Pass as `continue` for the next page; absent on the last page.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// What an intent journals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum IntentAction {
    /// Devices reserved for the claim before the result was published.
    Allocate,
    /// An allocation recorded from the cluster.
    Import,
    /// The cluster was seen to carry the allocation.
    Confirm,
    /// The claim's devices were freed.
    Release,
    /// An allocation that never reached the cluster was dropped.
    Abort,
}

impl From<IntentKind> for IntentAction {
    fn from(kind: IntentKind) -> Self {
        match kind {
            IntentKind::Allocate => IntentAction::Allocate,
            IntentKind::Import => IntentAction::Import,
            IntentKind::Confirm => IntentAction::Confirm,
            IntentKind::Release => IntentAction::Release,
            IntentKind::Abort => IntentAction::Abort,
        }
    }
}

/// How an allocate intent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum IntentOutcome {
    /// Confirmed in the cluster.
    Confirmed,
    /// Released before confirmation.
    Released,
    /// Aborted.
    Aborted,
}

impl From<Resolution> for IntentOutcome {
    fn from(resolution: Resolution) -> Self {
        match resolution {
            Resolution::Confirmed => IntentOutcome::Confirmed,
            Resolution::Released => IntentOutcome::Released,
            Resolution::Aborted => IntentOutcome::Aborted,
        }
    }
}

/// One journal entry of a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntentItem {
    /// The intent id.
    pub id: u64,
    /// What it journals.
    pub kind: IntentAction,
    /// The node.
    pub node: String,
    /// The devices.
    pub devices: Vec<String>,
    /// Unix milliseconds.
    pub at_ms: u64,
    /// How an allocate intent ended; absent while open and for other kinds.
    pub outcome: Option<IntentOutcome>,
    /// Unix milliseconds of the outcome.
    pub resolved_ms: Option<u64>,
}

impl From<Intent> for IntentItem {
    fn from(i: Intent) -> Self {
        IntentItem {
            id: i.id,
            kind: i.kind.into(),
            node: i.node,
            devices: i.devices,
            at_ms: i.at_ms,
            outcome: i.resolution.map(|(r, _)| r.into()),
            resolved_ms: i.resolution.map(|(_, at)| at),
        }
    }
}

/// `GET /v1/claims/{uid}`: a claim's allocation, if any, and its intent history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClaimDetailView {
    /// The claim UID.
    pub uid: String,
    /// The current allocation; absent once released.
    pub allocation: Option<ClaimItem>,
    /// The journalled intents, oldest first (within the retention bound).
    pub intents: Vec<IntentItem>,
}

impl ClaimDetailView {
    /// The view of `detail` for claim `uid`.
    pub fn new(uid: String, detail: ClaimDetail) -> Self {
        ClaimDetailView {
            uid,
            allocation: detail.allocation.map(Into::into),
            intents: detail.intents.into_iter().map(Into::into).collect(),
        }
    }
}

/// An allocation whose intent is durable but not yet seen in the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingIntentItem {
    /// The intent id.
    pub intent: u64,
    /// The claim UID.
    pub claim_uid: String,
    /// The claim namespace.
    pub namespace: String,
    /// The claim name.
    pub name: String,
    /// The pod, if any.
    pub pod_uid: Option<String>,
    /// The node.
    pub node: String,
    /// The reserved devices.
    pub devices: Vec<String>,
    /// Unix milliseconds when the intent was written.
    pub created_ms: u64,
}

impl From<PendingIntent> for PendingIntentItem {
    fn from(p: PendingIntent) -> Self {
        PendingIntentItem {
            intent: p.intent,
            claim_uid: p.claim.uid,
            namespace: p.claim.namespace,
            name: p.claim.name,
            pod_uid: p.pod_uid,
            node: p.node,
            devices: p.devices,
            created_ms: p.created_ms,
        }
    }
}

/// `GET /v1/intents`: the intents not yet resolved, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IntentList {
    /// The open intents.
    pub items: Vec<PendingIntentItem>,
}

/// One audit entry, flattened: `claimUid`, `node`, `devices` as the event has them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditItem {
    /// Sequence number; only grows.
    pub seq: u64,
    /// Unix milliseconds.
    pub at_ms: u64,
    /// What happened: `allocated`, `imported`, `confirmed`, `released`, `aborted`, `cordoned`,
    /// `uncordoned`, `deviceAdded`, `deviceRemoved`, `deviceMissing` or `deviceRestored`.
    pub event: String,
    /// The claim concerned.
    pub claim_uid: Option<String>,
    /// The node concerned.
    pub node: Option<String>,
    /// The devices concerned.
    pub devices: Vec<String>,
}

impl From<AuditEntry> for AuditItem {
    fn from(entry: AuditEntry) -> Self {
        let (event, claim_uid, node, devices) = match entry.event {
            AuditEvent::Allocated {
                claim_uid,
                node,
                devices,
            } => ("allocated", Some(claim_uid), Some(node), devices),
            AuditEvent::Imported {
                claim_uid,
                node,
                devices,
            } => ("imported", Some(claim_uid), Some(node), devices),
            AuditEvent::Confirmed { claim_uid } => ("confirmed", Some(claim_uid), None, Vec::new()),
            AuditEvent::Released {
                claim_uid,
                node,
                devices,
            } => ("released", Some(claim_uid), Some(node), devices),
            AuditEvent::Aborted {
                claim_uid,
                node,
                devices,
            } => ("aborted", Some(claim_uid), Some(node), devices),
            AuditEvent::Cordoned { node, device } => ("cordoned", None, Some(node), vec![device]),
            AuditEvent::Uncordoned { node, device } => {
                ("uncordoned", None, Some(node), vec![device])
            }
            AuditEvent::DeviceAdded { node, device } => {
                ("deviceAdded", None, Some(node), vec![device])
            }
            AuditEvent::DeviceRemoved { node, device } => {
                ("deviceRemoved", None, Some(node), vec![device])
            }
            AuditEvent::DeviceMissing { node, device } => {
                ("deviceMissing", None, Some(node), vec![device])
            }
            AuditEvent::DeviceRestored { node, device } => {
                ("deviceRestored", None, Some(node), vec![device])
            }
        };
        AuditItem {
            seq: entry.seq,
            at_ms: entry.at_ms,
            event: event.to_owned(),
            claim_uid,
            node,
            devices,
        }
    }
}

/// `GET /v1/audit`: audit entries after `since`, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    /// The entries.
    pub items: Vec<AuditItem>,
    /// Pass as `since` for the entries after these (the last sequence number, or the `since`
    /// asked for when there were none).
    pub next_since: u64,
}

/// `GET /v1/utilisation`: totals and per attribute value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UtilisationView {
    /// All devices.
    pub totals: Counts,
    /// Per attribute name, per value as text (`model` -> `H200` -> counts).
    pub by_attribute: BTreeMap<String, BTreeMap<String, Counts>>,
    /// Claims with an allocation.
    pub claims_allocated: u64,
    /// Allocations still pending confirmation.
    pub intents_pending: u64,
}

impl From<Utilisation> for UtilisationView {
    fn from(u: Utilisation) -> Self {
        UtilisationView {
            totals: u.totals.into(),
            by_attribute: u
                .by_attribute
                .into_iter()
                .map(|(name, values)| {
                    let values = values.into_iter().map(|(v, c)| (v, c.into())).collect();
                    (name, values)
                })
                .collect(),
            claims_allocated: u.claims_allocated,
            intents_pending: u.intents_pending,
        }
    }
}

/// Optional body of the cordon and uncordon endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CordonRequest {
    /// Why, recorded in the server log with the change.
    pub reason: Option<String>,
}

/// The result of a cordon or uncordon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CordonResult {
    /// The node.
    pub node: String,
    /// The device.
    pub device: String,
    /// Whether the device is now cordoned.
    pub cordoned: bool,
    /// Whether this call changed it (false when it already was in that state).
    pub changed: bool,
}

/// `GET /healthz` and `GET /readyz` when healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Status {
    /// `ok` or `ready`.
    pub status: String,
}
