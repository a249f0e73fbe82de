//! The in-memory inventory the fitting logic reads: every node's devices with their cordon and
//! missing flags and current consumers, as the ledger records them. Lookup by node name is
//! O(1) (see `index.rs`); the compact data the search reads lives in `compact.rs`. Pure data;
//! no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::compact::{Interner, NodeEntry};
use super::index::NodeIndex;
use super::FitError;
use crate::model::{Device, Sharing};

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

/// All nodes' devices and their state, keyed by node name: a hashed lookup for the search and
/// name order for iteration.
///
/// Attribute names and values are interned for the life of the inventory; rebuilding it from
/// the ledger drops values no device carries any more.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    index: NodeIndex,
    /// Entries by slot of `index`; `None` for removed nodes.
    entries: Vec<Option<NodeEntry>>,
    /// Slot by node name, for ordered iteration.
    order: BTreeMap<String, usize>,
    interner: Interner,
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
        let (slot, added) = self.index.insert(&view.name);
        if added {
            self.order.insert(view.name.clone(), slot);
        }
        if slot == self.entries.len() {
            self.entries.push(None);
        }
        self.entries[slot] = Some(NodeEntry::new(view, &mut self.interner));
        Ok(())
    }

    /// Removes a node, returning its view.
    pub fn remove_node(&mut self, node: &str) -> Option<NodeView> {
        let slot = self.index.remove(node)?;
        self.order.remove(node);
        self.entries[slot].take().map(|e| e.view)
    }

    /// The node named `node`.
    pub fn node(&self, node: &str) -> Option<&NodeView> {
        self.entry(node).map(|e| &e.view)
    }

    /// All nodes in name order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeView> {
        self.entries().map(|e| &e.view)
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
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
        entry.view.devices[i].consumers = consumers;
        entry.refresh(i);
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
        entry.refresh(i);
        Ok(())
    }

    /// Sets a device's missing flag.
    pub fn set_missing(&mut self, node: &str, device: &str, missing: bool) -> Result<(), FitError> {
        let entry = self.entry_mut(node)?;
        let i = Self::position(entry, node, device)?;
        entry.view.devices[i].missing = missing;
        entry.refresh(i);
        Ok(())
    }

    pub(crate) fn entry(&self, node: &str) -> Option<&NodeEntry> {
        self.entries[self.index.get(node)?].as_ref()
    }

    /// Entries in node-name order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &NodeEntry> {
        self.order
            .values()
            .filter_map(|&slot| self.entries[slot].as_ref())
    }

    pub(crate) fn interner(&self) -> &Interner {
        &self.interner
    }

    fn entry_mut(&mut self, node: &str) -> Result<&mut NodeEntry, FitError> {
        self.index
            .get(node)
            .and_then(|slot| self.entries[slot].as_mut())
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
