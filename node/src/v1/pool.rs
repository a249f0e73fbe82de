//! The node's pool laid out in `ResourceSlice`s when devices are shared ([`pool_slices`]): the
//! counter sets in slices of their own (at most [`MAX_COUNTER_SETS_PER_SLICE`] each), the
//! devices in others (at most [`MAX_DEVICES_PER_SLICE`] each, or
//! [`MAX_DEVICES_PER_SLICE_WITH_COUNTERS`] once a device consumes counters or has taints), and
//! every slice counting all of them in `resourceSliceCount`, as 1.36 validates partitionable
//! pools (`pkg/apis/resource/validation`: `sharedCounters` and `devices` never in one slice).
//! Where the cluster does not serve the fields (1.34 and 1.35 with the gates off), whole
//! devices only: partitions are left out and shared devices are published as plain ones
//! ([`Served`]); [`kept_fields`] reads which fields a server kept. Pure: no I/O, no publishing
//! (that is [`super::slices`]).

use dra_types::resource_v1::{CounterSet, Device, ResourceSlice, MAX_DEVICES_PER_SLICE};

use super::{device, slice, SliceError};
use crate::device::{DeviceSharing, Discovered};

/// Counter sets one slice may hold (`ResourceSliceMaxCounterSets`).
pub const MAX_COUNTER_SETS_PER_SLICE: usize = 8;
/// Counters one counter set (or one consumption) may have
/// (`ResourceSliceMaxCountersPerCounterSet`, `...PerDeviceCounterConsumption`).
pub const MAX_COUNTERS_PER_SET: usize = 32;
/// Devices one slice may hold once any device in it consumes counters or has taints
/// (`ResourceSliceMaxDevicesWithTaintsOrConsumesCounters`).
pub const MAX_DEVICES_PER_SLICE_WITH_COUNTERS: usize = 64;

/// Which of the sharing fields the API server keeps: `partitions` (`sharedCounters` and
/// `consumesCounters`, gate `DRAPartitionableDevices`), `capacity` (`allowMultipleAllocations`
/// and capacity `requestPolicy`, gate `DRAConsumableCapacity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// Counter sets and devices that consume them are kept.
    pub partitions: bool,
    /// Multi-allocatable devices and request policies are kept.
    pub capacity: bool,
}

impl Served {
    /// Both kept (1.36 and later with the default gates).
    pub const ALL: Served = Served {
        partitions: true,
        capacity: true,
    };
    /// Neither kept (1.34 and 1.35 with the default gates).
    pub const NONE: Served = Served {
        partitions: false,
        capacity: false,
    };
}

/// The pool's content before it is laid out: counter sets and devices, in name order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolContent {
    /// The counter sets.
    pub counter_sets: Vec<CounterSet>,
    /// The devices.
    pub devices: Vec<Device>,
}

/// The devices and counter sets of `found` as v1 holds them where the API server keeps the
/// fields `served` says: without `partitions`, devices that consume counters and the counter
/// sets are left out; without `capacity`, no device is marked for multiple allocations and
/// capacities have no request policy.
///
/// # Errors
/// What v1 cannot hold: see [`super::slice_for`], and counter sets or consumptions of more
/// than [`MAX_COUNTERS_PER_SET`] counters.
pub fn pool_content(found: &Discovered, served: Served) -> Result<PoolContent, SliceError> {
    let mut devices = Vec::new();
    for d in found.devices.values() {
        let shared = found.sharing.get(&d.name);
        if !served.partitions && shared.is_some_and(|s| !s.consumes_counters.is_empty()) {
            continue;
        }
        let mut out = device(&d.name, &d.attributes)?;
        if let Some(shared) = shared {
            apply_sharing(&mut out, shared, served)?;
        }
        devices.push(out);
    }
    let counter_sets: Vec<CounterSet> = if served.partitions {
        found.counter_sets.values().cloned().collect()
    } else {
        Vec::new()
    };
    if let Some(set) = counter_sets
        .iter()
        .find(|s| s.counters.len() > MAX_COUNTERS_PER_SET)
    {
        return Err(SliceError::TooManyCounters {
            owner: format!("counter set {}", set.name),
            count: set.counters.len(),
            max: MAX_COUNTERS_PER_SET,
        });
    }
    Ok(PoolContent {
        counter_sets,
        devices,
    })
}

impl PoolContent {
    /// The pool's slices at `generation`: counter-set slices first, then device slices in
    /// device order, [`MAX_DEVICES_PER_SLICE_WITH_COUNTERS`] devices each once any device
    /// consumes counters or has taints, else [`MAX_DEVICES_PER_SLICE`]; a pool with neither
    /// devices nor counter sets has one empty device slice.
    pub fn into_slices(self, node: &str, driver: &str, generation: i64) -> Vec<ResourceSlice> {
        let per_slice = if self
            .devices
            .iter()
            .any(|d| !d.consumes_counters.is_empty() || !d.taints.is_empty())
        {
            MAX_DEVICES_PER_SLICE_WITH_COUNTERS
        } else {
            MAX_DEVICES_PER_SLICE
        };
        let set_chunks: Vec<&[CounterSet]> = self
            .counter_sets
            .chunks(MAX_COUNTER_SETS_PER_SLICE)
            .collect();
        let mut device_chunks: Vec<&[Device]> = self.devices.chunks(per_slice).collect();
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
        with_sets.chain(with_devices).collect()
    }
}

/// The slices of the node's pool at `generation` ([`pool_content`] laid out by
/// [`PoolContent::into_slices`]).
///
/// # Errors
/// As [`pool_content`].
pub fn pool_slices(
    node: &str,
    driver: &str,
    generation: i64,
    found: &Discovered,
    served: Served,
) -> Result<Vec<ResourceSlice>, SliceError> {
    Ok(pool_content(found, served)?.into_slices(node, driver, generation))
}

/// Whether `slice` uses any of the sharing fields.
pub fn uses_sharing(slice: &ResourceSlice) -> bool {
    !slice.spec.shared_counters.is_empty()
        || slice.spec.devices.iter().any(|d| {
            !d.consumes_counters.is_empty()
                || d.allow_multiple_allocations.is_some()
                || d.capacity.values().any(|c| c.request_policy.is_some())
        })
}

/// Which sharing fields of `sent` the API server kept in `stored` (its answer to a create of
/// `sent`); a kind of field `sent` does not use counts as kept.
pub fn kept_fields(sent: &ResourceSlice, stored: &ResourceSlice) -> Served {
    let stored_device = |name: &str| stored.spec.devices.iter().find(|d| d.name == name);
    let mut kept = Served {
        partitions: sent.spec.shared_counters.is_empty()
            || stored.spec.shared_counters == sent.spec.shared_counters,
        capacity: true,
    };
    for device in &sent.spec.devices {
        let back = stored_device(&device.name);
        if !device.consumes_counters.is_empty()
            && back.is_none_or(|b| b.consumes_counters != device.consumes_counters)
        {
            kept.partitions = false;
        }
        let policies_lost = device.capacity.iter().any(|(name, capacity)| {
            capacity.request_policy.is_some()
                && back
                    .and_then(|b| b.capacity.get(name))
                    .is_none_or(|c| c.request_policy.is_none())
        });
        if policies_lost
            || (device.allow_multiple_allocations.is_some()
                && back.is_none_or(|b| b.allow_multiple_allocations.is_none()))
        {
            kept.capacity = false;
        }
    }
    kept
}

/// Adds a device's sharing fields: those the cluster serves, and the capacities' values.
fn apply_sharing(
    out: &mut Device,
    shared: &DeviceSharing,
    served: Served,
) -> Result<(), SliceError> {
    for (name, capacity) in &shared.capacity {
        let mut capacity = capacity.clone();
        if !served.capacity {
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
    if served.capacity {
        out.allow_multiple_allocations = shared.allow_multiple_allocations.then_some(true);
    }
    if served.partitions {
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
pub(crate) mod tests;
