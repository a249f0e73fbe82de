//! The in-memory inventory the fitting logic reads: every node's devices with their cordon and
//! missing flags and current consumers, as the ledger records them. Lookup by node name is
//! O(1) (see `index.rs`); the compact data the search reads lives in one arena (`block.rs`),
//! the public [`NodeView`]s beside it. Pure data; no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::block::Blocks;
pub(crate) use super::block::NodeRef;
use super::compact::{Interner, Usage};
use super::index::{name_tag, NodeIndex};
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

/// One device's attributes as interned ids: `(attribute id, value id)` pairs in name order.
pub(crate) type Cells = Box<[(u32, u32)]>;

/// All nodes' devices and their state, keyed by node name: a hashed lookup for the search and
/// name order for iteration.
///
/// Attribute names and values are interned for the life of the inventory; rebuilding it from
/// the ledger drops values no device carries any more. The views keep devices without their
/// attributes, which are held as interned ids instead (a few bytes per attribute rather than a
/// copy of every name and value); [`Inventory::node`] and [`Inventory::nodes`] put them back.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    index: NodeIndex,
    /// Views by slot, their devices without attributes; `None` for free slots.
    views: Vec<Option<NodeView>>,
    /// The attributes of each device of each slot's view, as interned ids.
    cells: Vec<Vec<Cells>>,
    /// The search data by slot.
    blocks: Blocks,
    /// Slots of removed nodes, for reuse.
    free: Vec<usize>,
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
        let slot = if let Some(slot) = self.slot(&view.name) {
            slot
        } else {
            let slot = self.free.pop().unwrap_or(self.views.len());
            if slot == self.views.len() {
                self.views.push(None);
                self.cells.push(Vec::new());
            }
            self.index.insert(name_tag(&view.name), slot);
            self.order.insert(view.name.clone(), slot);
            slot
        };
        let cells: Vec<Cells> = view
            .devices
            .iter_mut()
            .map(|d| {
                let attributes = std::mem::take(&mut d.device.attributes);
                self.interner.intern(&attributes).into_boxed_slice()
            })
            .collect();
        self.blocks
            .write(slot, &view, &cells, self.interner.width());
        self.views[slot] = Some(view);
        self.cells[slot] = cells;
        Ok(())
    }

    /// The view of `slot` with its devices' attributes.
    fn whole_view(&self, slot: usize) -> Option<NodeView> {
        let mut view = self.views[slot].clone()?;
        for (device, cells) in view.devices.iter_mut().zip(&self.cells[slot]) {
            device.device.attributes = cells
                .iter()
                .map(|&(attribute, value)| {
                    (
                        self.interner.name(attribute).to_owned(),
                        self.interner.values(attribute).get(value).clone(),
                    )
                })
                .collect();
        }
        Some(view)
    }

    /// Whether `node` has exactly `devices`, each with its attributes and not missing, and no
    /// other device that is not marked missing (no node: whether `devices` is empty).
    pub fn publishes_exactly(&self, node: &str, devices: &[Device]) -> bool {
        let Some(slot) = self.slot(node) else {
            return devices.is_empty();
        };
        let view = self.view_at(slot);
        for device in devices {
            let Some(i) = view.position(&device.name) else {
                return false;
            };
            if view.devices[i].missing
                || !self.same_attributes(&self.cells[slot][i], &device.attributes)
            {
                return false;
            }
        }
        let published = view.devices.iter().filter(|d| !d.missing).count();
        published == devices.len()
    }

    /// Whether `cells` are the interned `attributes`.
    fn same_attributes(&self, cells: &[(u32, u32)], attributes: &Attributes) -> bool {
        cells.len() == attributes.len()
            && attributes.iter().all(|(name, value)| {
                let Some(attribute) = self.interner.attribute(name) else {
                    return false;
                };
                self.interner
                    .values(attribute)
                    .id(value)
                    .is_some_and(|id| cells.contains(&(attribute, id)))
            })
    }

    /// Removes a node, returning its view.
    pub fn remove_node(&mut self, node: &str) -> Option<NodeView> {
        let slot = self.slot(node)?;
        let view = self.whole_view(slot);
        self.index.remove(name_tag(node), slot);
        self.order.remove(node);
        self.blocks.release(slot);
        self.free.push(slot);
        self.views[slot] = None;
        self.cells[slot] = Vec::new();
        view
    }

    /// The node named `node`, with its devices' attributes.
    pub fn node(&self, node: &str) -> Option<NodeView> {
        self.slot(node).and_then(|slot| self.whole_view(slot))
    }

    /// All nodes in name order, with their devices' attributes.
    pub fn nodes(&self) -> impl Iterator<Item = NodeView> + '_ {
        self.order
            .values()
            .filter_map(|&slot| self.whole_view(slot))
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
        let (slot, i) = self.device_slot(node, device)?;
        self.view_mut(slot).devices[i].consumers = consumers;
        self.refresh(slot, i);
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
        let (slot, i) = self.device_slot(node, device)?;
        let current = &self.view_at(slot).devices[i].consumers;
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
        let (slot, i) = self.device_slot(node, device)?;
        let next = match &self.view_at(slot).devices[i].consumers {
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
        let (slot, i) = self.device_slot(node, device)?;
        self.view_mut(slot).devices[i].cordoned = cordoned;
        self.refresh(slot, i);
        Ok(())
    }

    /// Sets a device's missing flag.
    pub fn set_missing(&mut self, node: &str, device: &str, missing: bool) -> Result<(), FitError> {
        let (slot, i) = self.device_slot(node, device)?;
        self.view_mut(slot).devices[i].missing = missing;
        self.refresh(slot, i);
        Ok(())
    }

    /// The slot of `node`.
    fn slot(&self, node: &str) -> Option<usize> {
        self.index
            .get(name_tag(node), |slot| self.blocks.block(slot).name_is(node))
    }

    /// The node named `node`, as the search reads it.
    pub(crate) fn entry(&self, node: &str) -> Option<NodeRef<'_>> {
        self.index.find(name_tag(node), |slot| {
            let block = self.blocks.block(slot);
            block
                .name_is(node)
                .then(|| NodeRef::new(block, &self.views, &self.cells[slot], slot))
        })
    }

    fn entry_at(&self, slot: usize) -> NodeRef<'_> {
        NodeRef::new(
            self.blocks.block(slot),
            &self.views,
            &self.cells[slot],
            slot,
        )
    }

    /// Entries in node-name order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = NodeRef<'_>> {
        self.order.values().map(|&slot| self.entry_at(slot))
    }

    /// How many slots there are (node slots are below this).
    pub(crate) fn slots(&self) -> usize {
        self.views.len()
    }

    pub(crate) fn interner(&self) -> &Interner {
        &self.interner
    }

    fn view_at(&self, slot: usize) -> &NodeView {
        self.views[slot]
            .as_ref()
            .expect("a slot of the index has a view")
    }

    fn view_mut(&mut self, slot: usize) -> &mut NodeView {
        self.views[slot]
            .as_mut()
            .expect("a slot of the index has a view")
    }

    /// The slot of `node` and the position of `device` among its devices.
    fn device_slot(&self, node: &str, device: &str) -> Result<(usize, usize), FitError> {
        let slot = self
            .slot(node)
            .ok_or_else(|| FitError::UnknownNode(node.to_owned()))?;
        let view = self.views[slot]
            .as_ref()
            .ok_or_else(|| FitError::UnknownNode(node.to_owned()))?;
        let i = view
            .position(device)
            .ok_or_else(|| FitError::UnknownDevice {
                node: node.to_owned(),
                device: device.to_owned(),
            })?;
        Ok((slot, i))
    }

    /// Brings the block of `slot` in step with device `i` of its view.
    fn refresh(&mut self, slot: usize, i: usize) {
        let view = self.view_at(slot);
        let (usage, in_use) = (Usage::of(&view.devices[i]), view.in_use());
        self.blocks.set_usage(slot, i, usage);
        self.blocks.set_in_use(slot, in_use);
    }
}
