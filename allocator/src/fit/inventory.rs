//! The in-memory inventory the fitting logic reads: every node's devices with their cordon and
//! missing flags and current consumers, as the ledger records them. Lookup by node name is
//! O(log n). Attribute names and values are interned so that a selector is evaluated once per
//! distinct value. Pure data; no I/O.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::index::NodeIndex;
use super::FitError;
use crate::model::{AttributeValue, Attributes, Device, Sharing};

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

/// The values one attribute takes across the inventory, each with a dense id.
#[derive(Clone, Debug, Default)]
pub(crate) struct ValueTable {
    ids: HashMap<AttributeValue, u32>,
    list: Vec<AttributeValue>,
}

impl ValueTable {
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn get(&self, id: u32) -> &AttributeValue {
        &self.list[id as usize]
    }
}

/// Interned attribute names and values, so that a requirement is evaluated once per distinct
/// value of its attribute rather than once per device.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    names: HashMap<String, u32>,
    values: Vec<ValueTable>,
}

impl Interner {
    /// Interns every attribute of `attributes`, returning `(attribute id, value id)` pairs.
    fn intern(&mut self, attributes: &Attributes) -> Vec<(u32, u32)> {
        attributes
            .iter()
            .map(|(name, value)| {
                let next = u32::try_from(self.names.len()).expect("fewer than 2^32 attributes");
                let attribute = *self.names.entry(name.clone()).or_insert(next);
                if attribute as usize == self.values.len() {
                    self.values.push(ValueTable::default());
                }
                let table = &mut self.values[attribute as usize];
                let next = u32::try_from(table.list.len()).expect("fewer than 2^32 values");
                let value = *table.ids.entry(value.clone()).or_insert_with(|| {
                    table.list.push(value.clone());
                    next
                });
                (attribute, value)
            })
            .collect()
    }

    /// The id of an attribute name, if any device ever carried it.
    pub(crate) fn attribute(&self, name: &str) -> Option<u32> {
        self.names.get(name).copied()
    }

    pub(crate) fn values(&self, attribute: u32) -> &ValueTable {
        &self.values[attribute as usize]
    }
}

/// Marks an attribute a device does not carry in [`NodeEntry::values`].
const NO_VALUE: u32 = u32::MAX;

/// A device's occupancy by the ledger's state: what the fitting search starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Cordoned or missing: nobody new may take it.
    pub(crate) blocked: bool,
    /// Held (or reserved) exclusively.
    pub(crate) exclusive: bool,
    /// Shared consumers.
    pub(crate) shared: u32,
    /// Smallest `maxConsumers` among the shared consumers (`u32::MAX` when none).
    pub(crate) cap: u32,
}

impl Usage {
    fn of(device: &DeviceView) -> Self {
        let mut usage = Usage {
            blocked: device.cordoned || device.missing,
            exclusive: false,
            shared: 0,
            cap: u32::MAX,
        };
        match &device.consumers {
            Consumers::None => {}
            Consumers::Exclusive { .. } => usage.exclusive = true,
            Consumers::Shared(list) => {
                for c in list {
                    usage.take(Sharing::Shared {
                        max_consumers: c.max_consumers,
                    });
                }
            }
        }
        usage
    }

    /// Whether a request with `sharing` may take the device now.
    pub(crate) fn usable(self, sharing: Sharing) -> bool {
        !self.blocked
            && !self.exclusive
            && match sharing {
                Sharing::Exclusive => self.shared == 0,
                Sharing::Shared { max_consumers } => self.shared < max_consumers.min(self.cap),
            }
    }

    /// Records one more consumer with `sharing`.
    pub(crate) fn take(&mut self, sharing: Sharing) {
        match sharing {
            Sharing::Exclusive => self.exclusive = true,
            Sharing::Shared { max_consumers } => {
                self.shared += 1;
                self.cap = self.cap.min(max_consumers);
            }
        }
    }
}

/// One node: the public view plus a compact block the search reads (kept in step with the
/// view): per device a row of its occupancy followed by the value id of every attribute id
/// known when the node was inserted ([`NO_VALUE`] when absent).
#[derive(Clone, Debug)]
pub(crate) struct NodeEntry {
    pub(crate) view: NodeView,
    /// Attribute ids with a column in `hot`.
    width: usize,
    /// Rows of `ROW_HEAD + width` words, one per device in `view.devices` order.
    hot: Vec<u32>,
    pub(crate) in_use: usize,
}

/// Words before the attribute columns of a row: flags, shared consumers, cap.
const ROW_HEAD: usize = 3;
const BLOCKED: u32 = 1;
const EXCLUSIVE: u32 = 2;

impl NodeEntry {
    fn new(view: NodeView, interner: &mut Interner) -> Self {
        let pairs: Vec<Vec<(u32, u32)>> = view
            .devices
            .iter()
            .map(|d| interner.intern(&d.device.attributes))
            .collect();
        let width = interner.names.len();
        let row = ROW_HEAD + width;
        let mut hot = vec![NO_VALUE; row * view.devices.len()];
        for (d, pairs) in pairs.iter().enumerate() {
            for &(attribute, value) in pairs {
                hot[d * row + ROW_HEAD + attribute as usize] = value;
            }
        }
        let mut entry = NodeEntry {
            in_use: view.in_use(),
            view,
            width,
            hot,
        };
        for i in 0..entry.view.devices.len() {
            entry.refresh(i);
        }
        entry
    }

    /// Reads the first word of the search block so that its cache line is on its way while
    /// other candidates are resolved (a prefetch hint; the value is not used).
    pub(crate) fn warm(&self) {
        std::hint::black_box(self.hot.first());
    }

    fn row(&self) -> usize {
        ROW_HEAD + self.width
    }

    /// The occupancy of device `d` by the ledger's state.
    pub(crate) fn usage(&self, d: usize) -> Usage {
        let at = d * self.row();
        let flags = self.hot[at];
        Usage {
            blocked: flags & BLOCKED != 0,
            exclusive: flags & EXCLUSIVE != 0,
            shared: self.hot[at + 1],
            cap: self.hot[at + 2],
        }
    }

    /// The value id of `attribute` on device `d`.
    pub(crate) fn value_of(&self, d: usize, attribute: u32) -> Option<u32> {
        let attribute = attribute as usize;
        if attribute >= self.width {
            return None;
        }
        let value = self.hot[d * self.row() + ROW_HEAD + attribute];
        (value != NO_VALUE).then_some(value)
    }

    /// Recomputes the occupancy of device `i` (and the node's count in use) from the view.
    fn refresh(&mut self, i: usize) {
        let usage = Usage::of(&self.view.devices[i]);
        let at = i * self.row();
        self.hot[at] =
            (u32::from(usage.blocked) * BLOCKED) | (u32::from(usage.exclusive) * EXCLUSIVE);
        self.hot[at + 1] = usage.shared;
        self.hot[at + 2] = usage.cap;
        self.in_use = self.view.in_use();
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
