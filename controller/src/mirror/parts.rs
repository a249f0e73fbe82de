//! The partitions and shares of this driver's `resource.k8s.io/v1` ResourceSlices and claims,
//! as the ledger counts them: each node's physical units and how each device sits on one
//! ([`node_parts`]: a device that consumes counters belongs to the first counter set it names,
//! one that consumes none is its own unit), and what a claim's results hold ([`holds`]: the
//! whole device, or a share with its `shareID` and `consumedCapacity`), and how a claim on
//! multi-allocation devices is recorded ([`multi_allocation_sharing`]) with the fraction of its
//! GPU each device it holds in part is ([`share_permille`]); and the capacity view the admin
//! API shows, from the inventory and every claim's results ([`capacity_view`]).
//!
//! Pure, no I/O; counter and capacity names lose our driver's domain as attributes do. An
//! amount that is not a quantity is left out (the device's attributes report it).

use std::collections::BTreeMap;

use dra_allocator::capacity::{Amounts, DevicePart, Hold, NodeParts};
use dra_allocator::ledger::ClaimRef;
use dra_allocator::model::{Quantity, Sharing};
use dra_api::capacity::{CapacityView, ClaimHold};
use dra_types::resource_v1::{
    Counter, DeviceAttribute, DeviceRequestAllocationResult, ResourceClaim, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::mapping::{local_name, SliceInventory};

/// The amounts of `values` by local name, those that parse.
fn amounts<'a, V: 'a>(
    driver: &str,
    values: impl IntoIterator<Item = (&'a String, &'a V)>,
    quantity: impl Fn(&V) -> &ApiQuantity,
) -> Amounts {
    values
        .into_iter()
        .filter_map(|(name, value)| {
            let parsed = Quantity::parse(&quantity(value).0).ok()?;
            Some((local_name(driver, name), parsed))
        })
        .collect()
}

fn counter_value(counter: &Counter) -> &ApiQuantity {
    &counter.value
}

/// The units and device parts of one node from `slices`, its slices of `driver` (the newest
/// generation of each pool). A device name that appears twice keeps its first entry, as in the
/// inventory.
pub fn node_parts(driver: &str, slices: &[&ResourceSlice]) -> NodeParts {
    let mut parts = NodeParts::default();
    for slice in slices {
        for set in &slice.spec.shared_counters {
            parts
                .units
                .entry(set.name.clone())
                .or_default()
                .totals
                .extend(amounts(driver, &set.counters, counter_value));
        }
    }
    for slice in slices {
        for device in &slice.spec.devices {
            if device.name.is_empty() || parts.devices.contains_key(&device.name) {
                continue;
            }
            let capacity = amounts(driver, &device.capacity, |c| &c.value);
            let mut part = if let Some(consumption) = device.consumes_counters.first() {
                DevicePart {
                    unit: consumption.counter_set.clone(),
                    takes: amounts(driver, &consumption.counters, counter_value),
                    capacity,
                    multi_allocation: false,
                }
            } else {
                parts.units.entry(device.name.clone()).or_default().totals = capacity.clone();
                DevicePart::whole(&device.name, capacity)
            };
            part.multi_allocation = device.allow_multiple_allocations == Some(true);
            let unit = parts.units.entry(part.unit.clone()).or_default();
            if unit.model.is_none() {
                unit.model = model(driver, &device.attributes);
            }
            parts.devices.insert(device.name.clone(), part);
        }
    }
    parts
}

/// How the ledger records a claim on `devices` of a node with `parts`: shared without a bound of
/// its own when every device is given to many claims (`allowMultipleAllocations`: the scheduler
/// bounds the shares by capacity, and the ledger records them side by side); `None` otherwise
/// (the claim's own sharing holds).
pub fn multi_allocation_sharing(parts: Option<&NodeParts>, devices: &[String]) -> Option<Sharing> {
    let parts = parts?;
    let all_multi = devices.iter().all(|device| {
        parts
            .devices
            .get(device)
            .is_some_and(|part| part.multi_allocation)
    });
    (all_multi && !devices.is_empty()).then_some(Sharing::Shared {
        max_consumers: u32::MAX,
    })
}

/// The fraction of its unit each device of `holds` takes, in thousandths (at least one), for
/// the devices held in part (a partition, a share); devices held whole, and devices `parts` does
/// not have, are left out.
pub fn share_permille(parts: Option<&NodeParts>, holds: &[Hold]) -> BTreeMap<String, u32> {
    let Some(parts) = parts else {
        return BTreeMap::new();
    };
    let mut fractions: BTreeMap<&str, f64> = BTreeMap::new();
    for hold in holds {
        if let Some(fraction) = parts.fraction(hold) {
            *fractions.entry(hold.device.as_str()).or_default() += fraction;
        }
    }
    fractions
        .into_iter()
        .filter_map(|(device, fraction)| {
            // Between 1 and 1000 after the clamp: the conversion is exact.
            let permille = (fraction * 1000.0).round().clamp(1.0, 1000.0) as u32;
            (permille < 1000).then(|| (device.to_owned(), permille))
        })
        .collect()
}

/// The device's `model` attribute, in our domain or bare.
fn model(driver: &str, attributes: &BTreeMap<String, DeviceAttribute>) -> Option<String> {
    attributes.iter().find_map(|(name, value)| match value {
        DeviceAttribute::String(model) if local_name(driver, name) == "model" => {
            Some(model.clone())
        }
        _ => None,
    })
}

/// What claim `claim_uid` holds through `results` (its results of our driver without admin
/// access): one hold per result, a share where the result consumes capacity (with its share
/// ID), else the whole device.
pub fn holds(
    driver: &str,
    claim_uid: &str,
    results: &[&DeviceRequestAllocationResult],
) -> Vec<Hold> {
    results
        .iter()
        .map(|result| Hold {
            claim_uid: claim_uid.to_owned(),
            device: result.device.clone(),
            share_id: result.share_id.clone(),
            consumed: amounts(driver, &result.consumed_capacity, |q| q),
        })
        .collect()
}

/// The capacity view of `inventory` under `claims`: every node with parts, and what each
/// allocated claim holds there through its results of `driver` (admin access holds nothing and
/// is left out), with the claim's name. Results on a node the inventory does not know are left
/// out (the mirror reports them as drift).
pub fn capacity_view<'a>(
    driver: &str,
    inventory: &SliceInventory,
    claims: impl IntoIterator<Item = &'a ResourceClaim>,
) -> CapacityView {
    let mut view = CapacityView::default();
    for (node, parts) in &inventory.parts {
        view.nodes.entry(node.clone()).or_default().parts = parts.clone();
    }
    for claim in claims {
        let Some(uid) = claim.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
            continue;
        };
        let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) else {
            continue;
        };
        let claim_ref = ClaimRef::new(
            uid,
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
        for result in &allocation.devices.results {
            if result.driver != driver || result.admin_access == Some(true) {
                continue;
            }
            let node = inventory.node_of(&result.pool);
            let Some(of_node) = view.nodes.get_mut(node) else {
                continue;
            };
            for hold in holds(driver, uid, &[result]) {
                of_node.holds.push(ClaimHold {
                    claim: claim_ref.clone(),
                    hold,
                });
            }
        }
    }
    view
}

#[cfg(test)]
mod tests;
