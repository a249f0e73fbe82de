//! A device of this node as discovery reports it: the name the controller allocates by, typed
//! attributes (published to the scheduler and the controller), the device nodes a container
//! needs, and environment variables its CDI edits add. Plain data; no I/O.

use std::collections::BTreeMap;
use std::path::PathBuf;

use dra_allocator::model::AttributeValue;
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
