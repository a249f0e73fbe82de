//! The JSON shapes of the inventory views: device counts, nodes, devices, utilisation, and the
//! cordon and status answers.

use std::collections::BTreeMap;

use dra_allocator::ledger::{
    DeviceConsumer, DeviceCounts, DeviceHealth, DeviceStatus, NodeSummary, Utilisation,
};
use dra_allocator::model::Sharing;
use serde::{Deserialize, Serialize};

use super::capacity::{CapacityItem, ShareItem};
use crate::capacity::{CapacityView, NodeCapacity};
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeItem {
    /// The node name.
    pub name: String,
    /// Its device counts.
    pub devices: Counts,
    /// Admin-access claims on its devices; they hold none, so `devices` does not count them.
    #[serde(default)]
    pub admin_access: u64,
    /// Unhealthy devices (each also counted in `devices` by its state).
    #[serde(default)]
    pub unhealthy: u64,
    /// Whole-device equivalents and capacity allocated of total, where the node has
    /// partitions or devices given to several claims at once; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityItem>,
}

/// `GET /v1/nodes`: every node with devices in the ledger, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
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
                    admin_access: n.admin_access,
                    unhealthy: n.unhealthy,
                    capacity: None,
                })
                .collect(),
        }
    }
}

impl NodeList {
    /// Adds each node's capacity from `view`.
    #[must_use]
    pub fn with_capacity(mut self, view: &CapacityView) -> Self {
        for node in &mut self.items {
            node.capacity = CapacityItem::of_node(view.nodes.get(&node.name));
        }
        self
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
    /// The UIDs of the admin-access claims looking at it; they hold nothing, so they are not
    /// among `consumers` and leave `state` as it is.
    #[serde(default)]
    pub admin_access: Vec<String>,
    /// The device's health as its node agent reports it.
    #[serde(default)]
    pub health: HealthItem,
    /// Where the device is a partition: the GPU (counter set) it is part of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Where the device is given to several claims at once: the share each holds, in
    /// allocation order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<ShareItem>,
}

impl DeviceItem {
    /// Adds the device's parent and shares from its node's capacity, if any.
    #[must_use]
    pub fn with_capacity(mut self, node: Option<&NodeCapacity>) -> Self {
        if let Some(node) = node {
            self.parent = node.parent_of(&self.name).map(str::to_owned);
            self.shares = node.shares_of(&self.name).map(ShareItem::from).collect();
        }
        self
    }
}

/// A device's health: `healthy`, or `unhealthy` with the reason and since when.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthItem {
    /// `healthy` or `unhealthy`.
    pub state: HealthState,
    /// Why it is unhealthy, e.g. `XidCritical`; absent when healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unix milliseconds since when it is unhealthy; absent when healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
}

/// Whether a device is healthy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum HealthState {
    /// No health problem reported.
    #[default]
    Healthy,
    /// Its node agent reports it unhealthy.
    Unhealthy,
}

impl From<Option<DeviceHealth>> for HealthItem {
    fn from(health: Option<DeviceHealth>) -> Self {
        match health {
            None => HealthItem::default(),
            Some(h) => HealthItem {
                state: HealthState::Unhealthy,
                reason: Some(h.reason),
                since_ms: Some(h.since_ms),
            },
        }
    }
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
            admin_access: d.admin_access,
            health: d.health.into(),
            parent: None,
            shares: Vec::new(),
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

/// `GET /v1/utilisation`: totals and per attribute value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
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
    /// Per model (`unknown` for units without one): whole-device equivalents and capacity
    /// allocated of total on the nodes with partitions or shared devices; absent where none
    /// has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_by_model: Option<BTreeMap<String, CapacityItem>>,
}

impl UtilisationView {
    /// Adds the capacity per model from `view`.
    #[must_use]
    pub fn with_capacity(mut self, view: &CapacityView) -> Self {
        let hidden = view.placement_counters();
        self.capacity_by_model = view.shared_utilisation().map(|u| {
            u.by_model
                .iter()
                .map(|(model, usage)| (model.clone(), CapacityItem::new(usage, &hidden)))
                .collect()
        });
        self
    }
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
            capacity_by_model: None,
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
