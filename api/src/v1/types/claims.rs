//! The JSON shapes of the claim views: allocations, claim detail with intents, open intents and
//! the audit log.

use dra_allocator::ledger::{
    AdminAccess, Allocation, AllocationState, AuditEntry, AuditEvent, ClaimDetail, Intent,
    IntentKind, PendingIntent, Resolution, UnhealthyDevice,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::admin_access::AdminAccessItem;
use super::inventory::SharingView;

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
    /// The claim's devices its node agent reports unhealthy.
    #[serde(default)]
    pub unhealthy_devices: Vec<String>,
}

impl ClaimItem {
    /// The item of `allocation`, flagging its devices among `unhealthy` (node, device).
    pub fn with_health(allocation: Allocation, unhealthy: &[UnhealthyDevice]) -> Self {
        let mut item = ClaimItem::from(allocation);
        item.unhealthy_devices = item
            .devices
            .iter()
            .filter(|d| {
                unhealthy
                    .iter()
                    .any(|u| u.node == item.node && u.device == **d)
            })
            .cloned()
            .collect();
        item
    }
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
            unhealthy_devices: Vec::new(),
        }
    }
}

/// `GET /v1/claims`: one page of allocations by claim UID, and the admin-access claims apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClaimList {
    /// The allocations.
    pub items: Vec<ClaimItem>,
    /// The admin-access claims matching the same filters, by claim UID: they hold no device, so
    /// they are not among `items`. All of them come with the first page; later pages (with
    /// `continue`) carry none.
    #[serde(rename = "adminAccess", default)]
    pub admin_access: Vec<AdminAccessItem>,
    /// An opaque token for the next page: pass it unchanged as `continue` with the same
    /// filters; absent on the last page. It is valid only with the ledger that issued it (the
    /// leader's, in its term).
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

/// `GET /v1/claims/{uid}`: a claim's allocation, if any, and its intent history; for an
/// admin-access claim, its admin access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClaimDetailView {
    /// The claim UID.
    pub uid: String,
    /// The current allocation; absent once released.
    pub allocation: Option<ClaimItem>,
    /// The journalled intents, oldest first (within the retention bound).
    pub intents: Vec<IntentItem>,
    /// Present when the claim has admin access to devices (which it holds none of).
    #[serde(
        rename = "adminAccess",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub admin_access: Option<AdminAccessItem>,
}

impl ClaimDetailView {
    /// The view of claim `uid` from its `detail` (allocation and intents) and `admin_access`;
    /// `None` when the ledger knows neither.
    pub fn new(
        uid: String,
        detail: Option<ClaimDetail>,
        admin_access: Option<AdminAccess>,
        unhealthy: &[UnhealthyDevice],
    ) -> Option<Self> {
        if detail.is_none() && admin_access.is_none() {
            return None;
        }
        let (allocation, intents) =
            detail.map_or((None, Vec::new()), |d| (d.allocation, d.intents));
        Some(ClaimDetailView {
            uid,
            allocation: allocation.map(|a| ClaimItem::with_health(a, unhealthy)),
            intents: intents.into_iter().map(Into::into).collect(),
            admin_access: admin_access.map(Into::into),
        })
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
    /// `uncordoned`, `deviceAdded`, `deviceRemoved`, `deviceMissing`, `deviceRestored`,
    /// `adminAccessRecorded`, `adminAccessReplaced`, `adminAccessReleased`, `deviceUnhealthy`
    /// (or unhealthy for another reason) or `deviceHealthy`.
    pub event: String,
    /// The claim concerned.
    pub claim_uid: Option<String>,
    /// The node concerned.
    pub node: Option<String>,
    /// The devices concerned.
    pub devices: Vec<String>,
    /// For `deviceUnhealthy`: the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl From<AuditEntry> for AuditItem {
    fn from(entry: AuditEntry) -> Self {
        let mut reason = None;
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
            AuditEvent::AdminAccessRecorded {
                claim_uid,
                node,
                devices,
            } => ("adminAccessRecorded", Some(claim_uid), Some(node), devices),
            AuditEvent::AdminAccessReplaced {
                claim_uid,
                node,
                devices,
            } => ("adminAccessReplaced", Some(claim_uid), Some(node), devices),
            AuditEvent::AdminAccessReleased {
                claim_uid,
                node,
                devices,
            } => ("adminAccessReleased", Some(claim_uid), Some(node), devices),
            AuditEvent::DeviceHealthChanged {
                node, device, to, ..
            } => {
                let event = if to.is_some() {
                    "deviceUnhealthy"
                } else {
                    "deviceHealthy"
                };
                reason = to.map(|t| t.reason);
                (event, None, Some(node), vec![device])
            }
        };
        AuditItem {
            seq: entry.seq,
            at_ms: entry.at_ms,
            event: event.to_owned(),
            claim_uid,
            node,
            devices,
            reason,
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
