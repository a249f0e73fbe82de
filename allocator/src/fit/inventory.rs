//! The in-memory inventory the fitting logic reads: every node's devices with their cordon and
//! missing flags and current consumers, as the ledger records them. Lookup by node name is
//! O(log n). Identical attribute sets are interned once so that selectors are evaluated once per
//! distinct set. Pure data; no I/O.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::FitError;
use crate::model::{Attributes, Device, Sharing};

/// One claim sharing a device, with the limit it was allocated under.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedConsumer {
    /// The claim's UID.
    pub claim_uid: String,
    /// The claim's `maxConsumers`.
    pub max_consumers: u32,
}

/// Who holds a device now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Consumers {
    /// Nobody: the device is free.
    #[default]
    None,
    /// One claim holds it exclusively.
    #[serde(rename_all = "camelCase")]
    Exclusive {
        /// The holder's UID.
        claim_uid: String,
    },
    /// One or more claims share it.
    Shared(Vec<SharedConsumer>),
}

impl Consumers {
    /// Whether anybody holds the device.
    pub fn is_in_use(&self) -> bool {
        match self {
            Consumers::None => false,
            Consumers::Exclusive { .. } => true,
            Consumers::Shared(list) => !list.is_empty(),
        }
    }

    /// How many claims hold the device.
    pub fn count(&self) -> usize {
        match self {
            Consumers::None => 0,
            Consumers::Exclusive { .. } => 1,
            Consumers::Shared(list) => list.len(),
        }
    }
}

/// One device as the ledger sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceView {
    /// Name and attributes.
    pub device: Device,
    /// Taken out of allocation by an operator; existing consumers keep it.
    pub cordoned: bool,
    /// No longer published in the node's `ResourceSlice`.
    pub missing: bool,
    /// Current holders.
    pub consumers: Consumers,
}

impl DeviceView {
    /// A free, published, uncordoned device.
    pub fn free(device: Device) -> Self {
        DeviceView {
            device,
            cordoned: false,
            missing: false,
            consumers: Consumers::None,
        }
    }
}

/// One node's devices, sorted by device name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeView {
    /// The node name.
    pub name: String,
    /// Its devices, sorted by name (the inventory sorts them on insert).
    pub devices: Vec<DeviceView>,
}

impl NodeView {
    /// A node from its name and devices.
    pub fn new(name: impl Into<String>, devices: Vec<DeviceView>) -> Self {
        NodeView {
            name: name.into(),
            devices,
        }
    }

    /// How many devices have at least one consumer.
    pub fn in_use(&self) -> usize {
        self.devices
            .iter()
            .filter(|d| d.consumers.is_in_use())
            .count()
    }

    /// The device named `name`, if any.
    pub fn device(&self, name: &str) -> Option<&DeviceView> {
        self.position(name).map(|i| &self.devices[i])
    }

    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.devices
            .binary_search_by(|d| d.device.name.as_str().cmp(name))
            .ok()
    }
}

/// Interned attribute sets: devices with identical attributes share one id.
#[derive(Clone, Debug, Default)]
pub(crate) struct Profiles {
    ids: HashMap<Attributes, u32>,
    list: Vec<Attributes>,
}

impl Profiles {
    fn intern(&mut self, attributes: &Attributes) -> u32 {
        if let Some(id) = self.ids.get(attributes) {
            return *id;
        }
        let id = u32::try_from(self.list.len()).expect("fewer than 2^32 attribute sets");
        self.list.push(attributes.clone());
        self.ids.insert(attributes.clone(), id);
        id
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn get(&self, id: u32) -> &Attributes {
        &self.list[id as usize]
    }
}

#[derive(Clone, Debug)]
pub(crate) struct NodeEntry {
    pub(crate) view: NodeView,
    /// Profile id per device, parallel to `view.devices`.
    pub(crate) profiles: Vec<u32>,
    pub(crate) in_use: usize,
}

/// All nodes' devices and their state, keyed by node name.
///
/// Attribute sets are interned for the life of the inventory; rebuilding it from the ledger
/// drops sets no device carries any more.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    nodes: BTreeMap<String, NodeEntry>,
    profiles: Profiles,
}

impl Inventory {
    /// An empty inventory.
    pub fn new() -> Self {
        Inventory::default()
    }

    /// An inventory of `nodes`; fails on a duplicate device name within a node.
    pub fn from_nodes(nodes: impl IntoIterator<Item = NodeView>) -> Result<Self, FitError> {
        let mut inventory = Inventory::new();
        for node in nodes {
            inventory.upsert_node(node)?;
        }
        Ok(inventory)
    }

    /// Inserts or replaces a node; its devices are sorted by name.
    pub fn upsert_node(&mut self, mut view: NodeView) -> Result<(), FitError> {
        view.devices
            .sort_by(|a, b| a.device.name.cmp(&b.device.name));
        if let Some(pair) = view
            .devices
            .windows(2)
            .find(|w| w[0].device.name == w[1].device.name)
        {
            return Err(FitError::DuplicateDevice {
                node: view.name,
                device: pair[0].device.name.clone(),
            });
        }
        let profiles = view
            .devices
            .iter()
            .map(|d| self.profiles.intern(&d.device.attributes))
            .collect();
        let in_use = view.in_use();
        self.nodes.insert(
            view.name.clone(),
            NodeEntry {
                view,
                profiles,
                in_use,
            },
        );
        Ok(())
    }

    /// Removes a node, returning its view.
    pub fn remove_node(&mut self, node: &str) -> Option<NodeView> {
        self.nodes.remove(node).map(|e| e.view)
    }

    /// The node named `node`.
    pub fn node(&self, node: &str) -> Option<&NodeView> {
        self.nodes.get(node).map(|e| &e.view)
    }

    /// All nodes in name order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeView> {
        self.nodes.values().map(|e| &e.view)
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Replaces the consumers of one device.
    pub fn set_consumers(
        &mut self,
        node: &str,
        device: &str,
        consumers: Consumers,
    ) -> Result<(), FitError> {
        let entry = self.entry_mut(node)?;
        let i = Self::position(entry, node, device)?;
        let was = entry.view.devices[i].consumers.is_in_use();
        let now = consumers.is_in_use();
        entry.view.devices[i].consumers = consumers;
        entry.in_use = entry.in_use + usize::from(now) - usize::from(was);
        Ok(())
    }

    /// Adds one consumer to a device (a repeat of the same claim is ignored). Fails when an
    /// exclusive holder exists, or when adding exclusively to a device in use.
    pub fn add_consumer(
        &mut self,
        node: &str,
        device: &str,
        claim_uid: &str,
        sharing: Sharing,
    ) -> Result<(), FitError> {
        let entry = self.entry_mut(node)?;
        let i = Self::position(entry, node, device)?;
        let current = &entry.view.devices[i].consumers;
        let next = match (current, sharing) {
            (Consumers::Exclusive { claim_uid: holder }, _) if holder == claim_uid => return Ok(()),
            (Consumers::Shared(list), Sharing::Shared { .. })
                if list.iter().any(|c| c.claim_uid == claim_uid) =>
            {
                return Ok(())
            }
            (c, Sharing::Exclusive) if !c.is_in_use() => Consumers::Exclusive {
                claim_uid: claim_uid.to_owned(),
            },
            (Consumers::None, Sharing::Shared { max_consumers }) => {
                Consumers::Shared(vec![SharedConsumer {
                    claim_uid: claim_uid.to_owned(),
                    max_consumers,
                }])
            }
            (Consumers::Shared(list), Sharing::Shared { max_consumers }) => {
                let mut list = list.clone();
                list.push(SharedConsumer {
                    claim_uid: claim_uid.to_owned(),
                    max_consumers,
                });
                Consumers::Shared(list)
            }
            _ => {
                return Err(FitError::DeviceInUse {
                    node: node.to_owned(),
                    device: device.to_owned(),
                })
            }
        };
        self.set_consumers(node, device, next)
    }

    /// Removes one claim from a device's consumers (nothing happens if it is not one).
    pub fn remove_consumer(
        &mut self,
        node: &str,
        device: &str,
        claim_uid: &str,
    ) -> Result<(), FitError> {
        let entry = self.entry_mut(node)?;
        let i = Self::position(entry, node, device)?;
        let next = match &entry.view.devices[i].consumers {
            Consumers::Exclusive { claim_uid: holder } if holder == claim_uid => Consumers::None,
            Consumers::Shared(list) => {
                let rest: Vec<_> = list
                    .iter()
                    .filter(|c| c.claim_uid != claim_uid)
                    .cloned()
                    .collect();
                if rest.is_empty() {
                    Consumers::None
                } else {
                    Consumers::Shared(rest)
                }
            }
            other => other.clone(),
        };
        self.set_consumers(node, device, next)
    }

    /// Sets a device's cordon flag.
    pub fn set_cordoned(
        &mut self,
        node: &str,
        device: &str,
        cordoned: bool,
    ) -> Result<(), FitError> {
        let entry = self.entry_mut(node)?;
        let i = Self::position(entry, node, device)?;
        entry.view.devices[i].cordoned = cordoned;
        Ok(())
    }

    /// Sets a device's missing flag.
    pub fn set_missing(&mut self, node: &str, device: &str, missing: bool) -> Result<(), FitError> {
        let entry = self.entry_mut(node)?;
        let i = Self::position(entry, node, device)?;
        entry.view.devices[i].missing = missing;
        Ok(())
    }

    pub(crate) fn entry(&self, node: &str) -> Option<&NodeEntry> {
        self.nodes.get(node)
    }

    pub(crate) fn entries(&self) -> impl Iterator<Item = &NodeEntry> {
        self.nodes.values()
    }

    pub(crate) fn profiles(&self) -> &Profiles {
        &self.profiles
    }

    fn entry_mut(&mut self, node: &str) -> Result<&mut NodeEntry, FitError> {
        self.nodes
            .get_mut(node)
            .ok_or_else(|| FitError::UnknownNode(node.to_owned()))
    }

    fn position(entry: &NodeEntry, node: &str, device: &str) -> Result<usize, FitError> {
        entry
            .view
            .position(device)
            .ok_or_else(|| FitError::UnknownDevice {
                node: node.to_owned(),
                device: device.to_owned(),
            })
    }
}
