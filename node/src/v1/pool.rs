//! The node's pool laid out in `ResourceSlice`s when devices are shared ([`pool_slices`]): the
//! counter sets in slices of their own (at most [`MAX_COUNTER_SETS_PER_SLICE`] each), the
//! devices in others (at most [`MAX_DEVICES_PER_SLICE`] each, or
//! [`MAX_DEVICES_PER_SLICE_WITH_COUNTERS`] once a device consumes counters), and every slice
//! counting all of them in `resourceSliceCount`, as 1.36 validates partitionable pools. Where the
//! cluster does not serve the fields (1.34 and 1.35 with the gates off), whole devices only:
//! partitions are left out and shared devices are published as plain ones. Pure: no I/O, no
//! publishing (that is [`super::slices`]).

use dra_types::resource_v1::{CounterSet, Device, ResourceSlice, MAX_DEVICES_PER_SLICE};

use super::{device, slice, SliceError};
use crate::device::{DeviceSharing, Discovered};

/// Counter sets one slice may hold.
pub const MAX_COUNTER_SETS_PER_SLICE: usize = 8;
/// Counters one counter set (or one consumption) may have.
pub const MAX_COUNTERS_PER_SET: usize = 32;
/// Devices one slice may hold once any device in it consumes counters or has taints.
pub const MAX_DEVICES_PER_SLICE_WITH_COUNTERS: usize = 64;

/// The slices of the node's pool at `generation`: counter-set slices first, then device
/// slices in device-name order; a pool with neither has one empty device slice. With
/// `sharing_served` false, devices that consume counters are left out, the counter sets are not
/// published and no device is marked for multiple allocations.
///
/// # Errors
/// What v1 cannot hold: see [`super::slice_for`], and counter sets of more than
/// [`MAX_COUNTERS_PER_SET`] counters.
pub fn pool_slices(
    node: &str,
    driver: &str,
    generation: i64,
    found: &Discovered,
    sharing_served: bool,
) -> Result<Vec<ResourceSlice>, SliceError> {
    let mut devices = Vec::new();
    for d in found.devices.values() {
        let shared = found.sharing.get(&d.name);
        if !sharing_served && shared.is_some_and(|s| !s.consumes_counters.is_empty()) {
            continue;
        }
        let mut out = device(&d.name, &d.attributes)?;
        if let Some(shared) = shared {
            apply_sharing(&mut out, shared, sharing_served)?;
        }
        devices.push(out);
    }
    let sets: Vec<CounterSet> = if sharing_served {
        found.counter_sets.values().cloned().collect()
    } else {
        Vec::new()
    };
    if let Some(set) = sets
        .iter()
        .find(|s| s.counters.len() > MAX_COUNTERS_PER_SET)
    {
        return Err(SliceError::TooManyCounters {
            owner: format!("counter set {}", set.name),
            count: set.counters.len(),
            max: MAX_COUNTERS_PER_SET,
        });
    }
    let per_slice = if devices.iter().any(|d| !d.consumes_counters.is_empty()) {
        MAX_DEVICES_PER_SLICE_WITH_COUNTERS
    } else {
        MAX_DEVICES_PER_SLICE
    };
    let set_chunks: Vec<&[CounterSet]> = sets.chunks(MAX_COUNTER_SETS_PER_SLICE).collect();
    let mut device_chunks: Vec<&[Device]> = devices.chunks(per_slice).collect();
    if device_chunks.is_empty() && set_chunks.is_empty() {
        device_chunks.push(&[]);
    }
    let count = set_chunks.len() + device_chunks.len();
    let with_sets = set_chunks
        .into_iter()
        .map(|chunk| slice(node, driver, generation, count, Vec::new(), chunk.to_vec()));
    let with_devices = device_chunks
        .into_iter()
        .map(|chunk| slice(node, driver, generation, count, chunk.to_vec(), Vec::new()));
    Ok(with_sets.chain(with_devices).collect())
}

/// Adds a device's sharing fields: all of them where the cluster serves them, else the
/// capacities' values only.
fn apply_sharing(
    out: &mut Device,
    shared: &DeviceSharing,
    sharing_served: bool,
) -> Result<(), SliceError> {
    for (name, capacity) in &shared.capacity {
        let mut capacity = capacity.clone();
        if !sharing_served {
            capacity.request_policy = None;
        }
        out.capacity.insert(name.clone(), capacity);
    }
    let total = out.attributes.len() + out.capacity.len();
    if total > super::MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE {
        return Err(SliceError::TooManyAttributes {
            device: out.name.clone(),
            count: total,
            max: super::MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
        });
    }
    if sharing_served {
        out.allow_multiple_allocations = shared.allow_multiple_allocations.then_some(true);
        if let Some(c) = shared
            .consumes_counters
            .iter()
            .find(|c| c.counters.len() > MAX_COUNTERS_PER_SET)
        {
            return Err(SliceError::TooManyCounters {
                owner: format!("device {}, consumption of {}", out.name, c.counter_set),
                count: c.counters.len(),
                max: MAX_COUNTERS_PER_SET,
            });
        }
        out.consumes_counters.clone_from(&shared.consumes_counters);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
