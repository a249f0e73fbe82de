//! Devices as parts of physical units (a GPU) and what claims hold of them: the unit a device
//! belongs to and what it takes of it when allocated, what a share of a multi-allocation device
//! consumes, and utilisation in whole-device equivalents and in capacity, per node and per
//! model.
//!
//! A *unit* is one physical device: a counter set a pool shares between the partitions of one
//! GPU, or a device that consumes no counters (it is its own unit, its capacity the unit's
//! totals). A device's *fraction* of its unit is the largest share it takes of any of the
//! unit's counters (the counters of one unit each, which mark a placement, counted together):
//! a partition blocks its GPU along its tightest dimension, so seven `1g` partitions (one
//! compute slice of seven, ten of eighty GiB each) fill the GPU, where counting memory alone
//! would say seven eighths. A share's fraction of its device is, likewise, the
//! largest share it consumes of any of the device's capacities. A unit counts at most once:
//! its equivalents are the sum of its holders' fractions, capped at one.
//!
//! Pure: no I/O, no clock. Must not depend on `ledger`, redb, tokio or kube; the mirror builds
//! [`NodeParts`] and [`Hold`]s from `ResourceSlice`s and claims, the ledger stores them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Quantity;

/// Amounts by counter or capacity name (`memory`, `compute`).
pub type Amounts = BTreeMap<String, Quantity>;

/// One physical unit of a node: a GPU whose partitions share its counters, or a device that
/// shares nothing with others.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    /// The `model` attribute of the unit's devices, when one of them publishes it.
    pub model: Option<String>,
    /// What the unit has of each counter or capacity.
    pub totals: Amounts,
}

/// How one device sits on its unit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevicePart {
    /// The key of the device's unit on its node (the counter set it consumes from, or the
    /// device's own name).
    pub unit: String,
    /// What the device takes of its unit when allocated: the counters it consumes, or, for a
    /// device that is its own unit, its capacity.
    pub takes: Amounts,
    /// The device's own capacity, which the shares of a multi-allocation device consume.
    pub capacity: Amounts,
    /// Whether the device is given to several claims at once (`allowMultipleAllocations`).
    pub multi_allocation: bool,
}

impl DevicePart {
    /// A device that is its own unit and shares nothing: it takes its whole `capacity`.
    pub fn whole(name: &str, capacity: Amounts) -> Self {
        DevicePart {
            unit: name.to_owned(),
            takes: capacity.clone(),
            capacity,
            multi_allocation: false,
        }
    }

    /// The fraction of `unit` the device takes: the largest of its amounts over the unit's
    /// totals, at most one; one when nothing can be compared (no amounts, an unknown unit).
    pub fn fraction_of(&self, unit: Option<&Unit>) -> f64 {
        let Some(unit) = unit else { return 1.0 };
        largest_fraction(&self.takes, &unit.totals).unwrap_or(1.0)
    }
}

/// The largest share `amounts` take of any dimension of `totals`, at most one; `None` when they
/// have none in common (or every total is zero). Each counter whose total is more than one
/// unit is a dimension (`memory`, `compute-slices`); the counters of one unit each (NVIDIA's
/// `memory-slice-I`, which say where a partition sits rather than how much it takes) are one
/// dimension together, the share of them taken: a `1g` on one memory slice of eight takes 1/8
/// of it, not all of its slice.
fn largest_fraction(amounts: &Amounts, totals: &Amounts) -> Option<f64> {
    let one = Quantity::from_units(1);
    let slots = totals.values().filter(|total| **total == one).count();
    let mut slots_taken = 0.0_f64;
    let mut largest: Option<f64> = None;
    for (name, amount) in amounts {
        let Some(total) = totals.get(name) else {
            continue;
        };
        if *total == one {
            slots_taken += amount.fraction_of(total).unwrap_or(0.0);
        } else if let Some(fraction) = amount.fraction_of(total) {
            largest = Some(largest.map_or(fraction, |l| l.max(fraction)));
        }
    }
    if slots_taken > 0.0 {
        let fraction = slots_taken / slots as f64;
        largest = Some(largest.map_or(fraction, |l| l.max(fraction)));
    }
    largest.map(|fraction| fraction.clamp(0.0, 1.0))
}

/// What one claim holds of one device: the whole device, or a share of a multi-allocation
/// device (its share ID and what it consumes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The claim UID.
    pub claim_uid: String,
    /// The device.
    pub device: String,
    /// The share ID the allocation result carries; `None` for a whole device.
    pub share_id: Option<String>,
    /// The capacity the share consumes (`consumedCapacity`); empty for a whole device.
    pub consumed: Amounts,
}

impl Hold {
    /// A claim holding the whole device.
    pub fn whole(claim_uid: &str, device: &str) -> Self {
        Hold {
            claim_uid: claim_uid.to_owned(),
            device: device.to_owned(),
            ..Hold::default()
        }
    }

    /// A claim holding share `share_id` of the device, consuming `consumed`.
    pub fn share(claim_uid: &str, device: &str, share_id: &str, consumed: Amounts) -> Self {
        Hold {
            claim_uid: claim_uid.to_owned(),
            device: device.to_owned(),
            share_id: Some(share_id.to_owned()),
            consumed,
        }
    }

    /// Whether the hold consumes part of a device rather than all of it.
    pub fn is_share(&self) -> bool {
        !self.consumed.is_empty()
    }

    /// The fraction of `part` the hold takes: one for a whole device, else the largest of its
    /// consumed amounts over the device's capacity (one when they have none in common).
    pub fn fraction_of_device(&self, part: &DevicePart) -> f64 {
        if self.is_share() {
            largest_fraction(&self.consumed, &part.capacity).unwrap_or(1.0)
        } else {
            1.0
        }
    }

    /// What the hold takes of its unit's counters or capacities: a share's consumed capacity,
    /// a whole device's amounts.
    pub fn amounts<'a>(&'a self, part: &'a DevicePart) -> &'a Amounts {
        if self.is_share() {
            &self.consumed
        } else {
            &part.takes
        }
    }
}

/// The units of one node and how each of its devices sits on them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeParts {
    /// The units by key.
    pub units: BTreeMap<String, Unit>,
    /// The devices by name.
    pub devices: BTreeMap<String, DevicePart>,
}

impl NodeParts {
    /// The fraction of its unit that `hold` takes (its share of the device times the device's
    /// fraction of the unit); `None` for a device the node does not have.
    pub fn fraction(&self, hold: &Hold) -> Option<f64> {
        let part = self.devices.get(&hold.device)?;
        Some(hold.fraction_of_device(part) * part.fraction_of(self.units.get(&part.unit)))
    }

    /// The node's utilisation under `holds`, in all and per model. Holds of devices the node
    /// does not have count for nothing (the mirror reports them as drift).
    pub fn utilisation(&self, holds: &[Hold]) -> NodeUtilisation {
        let mut held: BTreeMap<&str, Held<'_>> = BTreeMap::new();
        for hold in holds {
            let (Some(part), Some(fraction)) =
                (self.devices.get(&hold.device), self.fraction(hold))
            else {
                continue;
            };
            let (equivalents, amounts) = held.entry(part.unit.as_str()).or_default();
            *equivalents += fraction;
            for (name, amount) in hold.amounts(part) {
                amounts
                    .entry(name.as_str())
                    .and_modify(|sum| *sum = sum.saturating_add(*amount))
                    .or_insert(*amount);
            }
        }
        let mut utilisation = NodeUtilisation::default();
        for (key, unit) in &self.units {
            let of_unit = unit_utilisation(unit, held.get(key.as_str()));
            let model = unit.model.clone().unwrap_or_else(|| "unknown".to_owned());
            utilisation.total.add(&of_unit);
            utilisation.by_model.entry(model).or_default().add(&of_unit);
        }
        utilisation
    }
}

/// What the holders of one unit take together: the sum of their fractions and of their
/// amounts by name.
type Held<'a> = (f64, BTreeMap<&'a str, Quantity>);

/// One unit's utilisation from what its holders take together: equivalents capped at one,
/// each capacity capped at the unit's total.
fn unit_utilisation(unit: &Unit, held: Option<&Held<'_>>) -> Utilisation {
    let zero = Quantity::from_units(0);
    let capacity = unit
        .totals
        .iter()
        .map(|(name, total)| {
            let taken = held
                .and_then(|(_, amounts)| amounts.get(name.as_str()))
                .copied()
                .unwrap_or(zero);
            let usage = CapacityUse {
                allocated: taken.min(*total).max(zero),
                total: *total,
            };
            (name.clone(), usage)
        })
        .collect();
    Utilisation {
        units: 1,
        equivalents: held.map_or(0.0, |(equivalents, _)| equivalents.min(1.0)),
        capacity,
    }
}

/// How much of one capacity is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityUse {
    /// Allocated, at most `total`.
    pub allocated: Quantity,
    /// What the units have.
    pub total: Quantity,
}

/// Utilisation of some units: how many, how many whole-device equivalents are allocated, and
/// how much of each capacity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Utilisation {
    /// Physical units (GPUs).
    pub units: u64,
    /// Whole-device equivalents allocated: each unit counts its holders' fractions, at most one.
    pub equivalents: f64,
    /// Allocated and total by capacity name.
    pub capacity: BTreeMap<String, CapacityUse>,
}

impl Utilisation {
    /// [`equivalents`](Self::equivalents) rounded to thousandths, as they are shown: sums of
    /// fractions such as seven sevenths come out a hair off a whole number.
    pub fn equivalents_shown(&self) -> f64 {
        (self.equivalents * 1000.0).round() / 1000.0
    }

    /// Adds `other`'s units, equivalents and capacities to these.
    pub fn add(&mut self, other: &Utilisation) {
        self.units += other.units;
        self.equivalents += other.equivalents;
        for (name, usage) in &other.capacity {
            self.capacity
                .entry(name.clone())
                .and_modify(|sum| {
                    sum.allocated = sum.allocated.saturating_add(usage.allocated);
                    sum.total = sum.total.saturating_add(usage.total);
                })
                .or_insert(*usage);
        }
    }
}

/// The utilisation of a node (or of several nodes added up), in all and per model (`unknown`
/// for units without one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeUtilisation {
    /// All units.
    pub total: Utilisation,
    /// The units of each model.
    pub by_model: BTreeMap<String, Utilisation>,
}

impl NodeUtilisation {
    /// Adds `other` to these totals and models.
    pub fn add(&mut self, other: &NodeUtilisation) {
        self.total.add(&other.total);
        for (model, usage) in &other.by_model {
            self.by_model.entry(model.clone()).or_default().add(usage);
        }
    }
}

#[cfg(test)]
mod tests;
