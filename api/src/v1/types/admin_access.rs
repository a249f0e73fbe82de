//! The JSON shape of an admin-access claim: a claim that looks at devices (Kubernetes
//! `adminAccess: true`) and holds none of them, listed apart from allocations.

use dra_allocator::ledger::AdminAccess;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An admin-access claim as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminAccessItem {
    /// The claim UID.
    pub uid: String,
    /// The claim namespace.
    pub namespace: String,
    /// The claim name.
    pub name: String,
    /// The node of the devices.
    pub node: String,
    /// The device names on the node it has admin access to.
    pub devices: Vec<String>,
    /// Unix milliseconds when first recorded.
    pub recorded_ms: u64,
    /// Unix milliseconds of the last change.
    pub updated_ms: u64,
}

impl From<AdminAccess> for AdminAccessItem {
    fn from(a: AdminAccess) -> Self {
        AdminAccessItem {
            uid: a.claim.uid,
            namespace: a.claim.namespace,
            name: a.claim.name,
            node: a.node,
            devices: a.devices,
            recorded_ms: a.recorded_ms,
            updated_ms: a.updated_ms,
        }
    }
}
