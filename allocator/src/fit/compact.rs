//! Compact per-node data the fitting search reads: interned attribute names and values, each
//! device's occupancy, and one block per node holding both, kept in step with the public
//! [`NodeView`]. Pure data; no I/O.

use std::collections::HashMap;

use super::inventory::{Consumers, DeviceView, NodeView};
use crate::model::{AttributeValue, Attributes, Sharing};

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

/// Marks an attribute a device does not carry in a node's search block.
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
    pub(crate) fn new(view: NodeView, interner: &mut Interner) -> Self {
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

    /// Reads one word of every cache line of the search block so that the lines are on their
    /// way while other candidates are resolved (a prefetch hint; the values are not used).
    pub(crate) fn warm(&self) {
        for word in self.hot.iter().step_by(16) {
            std::hint::black_box(*word);
        }
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
    pub(crate) fn refresh(&mut self, i: usize) {
        let usage = Usage::of(&self.view.devices[i]);
        let at = i * self.row();
        self.hot[at] =
            (u32::from(usage.blocked) * BLOCKED) | (u32::from(usage.exclusive) * EXCLUSIVE);
        self.hot[at + 1] = usage.shared;
        self.hot[at + 2] = usage.cap;
        self.in_use = self.view.in_use();
    }
}
