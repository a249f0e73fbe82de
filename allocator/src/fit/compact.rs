//! Interned attribute names and values, and each device's occupancy as the fitting search reads
//! it (the per-node search blocks that hold both live in `block.rs`). Pure data; no I/O.

use std::collections::HashMap;

use super::inventory::{Consumers, DeviceView};
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

    #[inline]
    pub(crate) fn get(&self, id: u32) -> &AttributeValue {
        &self.list[id as usize]
    }

    /// The id of `value`, if any device carried it.
    pub(crate) fn id(&self, value: &AttributeValue) -> Option<u32> {
        self.ids.get(value).copied()
    }
}

/// Interned attribute names and values, so that a requirement is evaluated once per distinct
/// value of its attribute rather than once per device.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    names: HashMap<String, u32>,
    /// Attribute names by id.
    list: Vec<String>,
    values: Vec<ValueTable>,
}

impl Interner {
    /// Interns every attribute of `attributes`, returning `(attribute id, value id)` pairs.
    pub(crate) fn intern(&mut self, attributes: &Attributes) -> Vec<(u32, u32)> {
        attributes
            .iter()
            .map(|(name, value)| {
                let next = u32::try_from(self.names.len()).expect("fewer than 2^32 attributes");
                let attribute = *self.names.entry(name.clone()).or_insert(next);
                if attribute as usize == self.values.len() {
                    self.values.push(ValueTable::default());
                    self.list.push(name.clone());
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

    /// The name of attribute `id`.
    pub(crate) fn name(&self, id: u32) -> &str {
        &self.list[id as usize]
    }

    /// The id of an attribute name, if any device ever carried it.
    pub(crate) fn attribute(&self, name: &str) -> Option<u32> {
        self.names.get(name).copied()
    }

    #[inline]
    pub(crate) fn values(&self, attribute: u32) -> &ValueTable {
        &self.values[attribute as usize]
    }

    /// How many attribute names are interned (ids are `0..width()`).
    pub(crate) fn width(&self) -> usize {
        self.list.len()
    }
}

/// Cordoned or missing: nobody new may take the device.
const BLOCKED: u32 = 1;
/// Held (or reserved) exclusively.
const EXCLUSIVE: u32 = 2;
/// The shared consumer count sits above the two flag bits (and stops at `SHARED_MAX`).
const SHARED_SHIFT: u32 = 2;
const SHARED_MAX: u32 = u32::MAX >> SHARED_SHIFT;

/// A device's occupancy by the ledger's state: what the fitting search starts from. Two words,
/// as the search blocks store them, so that reading a node's occupancy is a copy: the flags
/// with the number of shared consumers, and the smallest `maxConsumers` among those consumers
/// (`u32::MAX` when none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Usage {
    flags: u32,
    cap: u32,
}

impl Usage {
    /// Free and not blocked.
    const FREE: Usage = Usage {
        flags: 0,
        cap: u32::MAX,
    };

    pub(crate) fn of(device: &DeviceView) -> Self {
        Self::of_holders(device, |_| true)
    }

    /// The occupancy by the consumers whose claim UID `counts`.
    pub(crate) fn of_holders(device: &DeviceView, counts: impl Fn(&str) -> bool) -> Self {
        let mut usage = Usage::FREE;
        if device.cordoned || device.missing {
            usage.flags |= BLOCKED;
        }
        match &device.consumers {
            Consumers::None => {}
            Consumers::Exclusive { claim_uid } => {
                if counts(claim_uid) {
                    usage.flags |= EXCLUSIVE;
                }
            }
            Consumers::Shared(list) => {
                for c in list.iter().filter(|c| counts(&c.claim_uid)) {
                    usage.take(Sharing::Shared {
                        max_consumers: c.max_consumers,
                    });
                }
            }
        }
        usage
    }

    /// The two words as stored in a search block.
    #[inline]
    pub(crate) fn words(self) -> [u32; 2] {
        [self.flags, self.cap]
    }

    /// The occupancy stored as `words` in a search block.
    #[inline]
    pub(crate) fn from_words(flags: u32, cap: u32) -> Self {
        Usage { flags, cap }
    }

    /// How many shared consumers hold the device.
    #[inline]
    pub(crate) fn shared(self) -> u32 {
        self.flags >> SHARED_SHIFT
    }

    /// Whether a request with `sharing` may take the device now.
    #[inline]
    pub(crate) fn usable(self, sharing: Sharing) -> bool {
        match sharing {
            // Neither blocked, nor held exclusively, nor shared.
            Sharing::Exclusive => self.flags == 0,
            Sharing::Shared { max_consumers } => {
                self.flags & (BLOCKED | EXCLUSIVE) == 0
                    && self.shared() < max_consumers.min(self.cap)
            }
        }
    }

    /// Records one more consumer with `sharing`.
    #[inline]
    pub(crate) fn take(&mut self, sharing: Sharing) {
        match sharing {
            Sharing::Exclusive => self.flags |= EXCLUSIVE,
            Sharing::Shared { max_consumers } => {
                if self.shared() < SHARED_MAX {
                    self.flags += 1 << SHARED_SHIFT;
                }
                self.cap = self.cap.min(max_consumers);
            }
        }
    }
}
