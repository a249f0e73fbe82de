//! A device of this node as discovery reports it: the name the controller allocates by, typed
//! attributes (published to the scheduler and the controller), the device nodes a container
//! needs, and environment variables its CDI edits add; what discovery found as a whole: the
//! devices, how they are shared, and the pool's counter sets; and one share of a device that a
//! claim holds. Plain data; no I/O.

use std::collections::BTreeMap;
use std::path::PathBuf;

use dra_allocator::model::AttributeValue;
use dra_types::resource_v1::{CounterSet, DeviceCapacity, DeviceCounterConsumption};
use serde::{Deserialize, Serialize};

/// One device of this node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDevice {
    /// The device name, unique on the node (`gpu-0`); what a resource handle names.
    pub name: String,
    /// Typed attributes (`vendor`, `model`, `pciAddress`, `numa`, `memory`, ...).
    #[serde(default)]
    pub attributes: BTreeMap<String, AttributeValue>,
    /// Host paths of the device nodes a container using the device needs.
    #[serde(default)]
    pub device_nodes: Vec<PathBuf>,
    /// Environment variables the CDI edits of a claim holding the device add.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// The devices of this node by name.
pub type Inventory = BTreeMap<String, NodeDevice>;

/// How a device is shared, as the v1 API publishes it: capacities (with the request policy
/// that lets several claims consume one device), whether the device may be allocated more
/// than once, and the counters it consumes from the pool's counter sets. Empty for a device
/// that is allocated whole.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceSharing {
    /// Capacities by name (`memory`, `compute`); a quantity attribute of the device is a
    /// capacity too when published.
    pub capacity: BTreeMap<String, DeviceCapacity>,
    /// Whether several claims may hold the device at once, each consuming some capacity.
    pub allow_multiple_allocations: bool,
    /// What allocating the device consumes of the pool's counter sets (at most two entries).
    pub consumes_counters: Vec<DeviceCounterConsumption>,
}

impl DeviceSharing {
    /// Whether the device is shared at all.
    pub fn is_empty(&self) -> bool {
        *self == DeviceSharing::default()
    }
}

/// What discovery found: the devices, how each of them is shared (devices allocated whole have
/// no entry), and the counter sets of the node's pool that partitions consume.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovered {
    /// The devices by name.
    pub devices: Inventory,
    /// The sharing fields of the devices that have any, by device name.
    pub sharing: BTreeMap<String, DeviceSharing>,
    /// The pool's counter sets by name.
    pub counter_sets: BTreeMap<String, CounterSet>,
}

impl From<Inventory> for Discovered {
    fn from(devices: Inventory) -> Self {
        Discovered {
            devices,
            ..Discovered::default()
        }
    }
}

/// One share of a device allocated to several claims at once (`allowMultipleAllocations`):
/// the allocation result's `shareID` and what the share consumes of the device's capacities
/// (`consumedCapacity`, quantities as the allocation writes them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceShare {
    /// The device shared.
    pub device: String,
    /// The allocation's share ID (a UID), unique among the device's shares.
    pub share_id: String,
    /// The capacity consumed, by capacity name (`memory: 40Gi`, `compute: "50"`).
    pub consumed: BTreeMap<String, String>,
}
