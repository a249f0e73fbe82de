//! The JSON shape of `GET /v1/devices`: the devices of a few nodes and who holds them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::inventory::DeviceList;

/// A claim holding (or, with admin access, looking at) a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HolderItem {
    /// The claim namespace.
    pub namespace: String,
    /// The claim name.
    pub name: String,
    /// Unix milliseconds since when it holds its devices (its allocation's creation, or when
    /// its admin access was first recorded).
    pub since_ms: u64,
    /// Whether it is an admin-access claim, holding nothing.
    #[serde(default)]
    pub admin_access: bool,
}

/// `GET /v1/devices`: the devices of the named nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeviceGrid {
    /// Each named node with devices in the ledger, in the order named, its devices as
    /// `GET /v1/nodes/{node}/devices` answers them.
    pub items: Vec<DeviceList>,
    /// Every claim UID among the devices' `consumers` and `adminAccess`, with its namespace,
    /// name and start.
    pub holders: BTreeMap<String, HolderItem>,
    /// The named nodes without devices in the ledger.
    pub absent: Vec<String>,
}
