//! The arithmetic of shared devices as `k8s.io/dynamic-resource-allocation/structured` 1.36
//! does it: what one allocation of a device with `allowMultipleAllocations` consumes of each
//! capacity (the request's amount rounded up under the capacity's `requestPolicy`, its
//! `default` when the request names none, the whole capacity without either), whether a policy
//! refuses an amount, whether a request fits a device allocated whole, and the counters a
//! partition consumes of its pool's counter sets.
//!
//! Pure: no I/O; depends only on the v1 model and [`Quantity`], never on the search.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::quantity::Quantity;
use dra_types::resource_v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, CapacityRequirements, Device, DeviceCapacity,
};

/// Amounts by capacity or counter name.
pub type Amounts = BTreeMap<String, Quantity>;

/// Which sharing mechanisms the allocator honours (the `DRAPartitionableDevices` and
/// `DRAConsumableCapacity` gates).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sharing {
    /// Devices consume their pool's counters.
    pub partitionable: bool,
    /// Devices with `allowMultipleAllocations` are shared by capacity.
    pub consumable: bool,
}

/// What one allocation consumes of one capacity: the amount as the result records it, and its
/// value.
#[derive(Debug, Clone, PartialEq)]
pub struct Consumed {
    /// The capacity's name.
    pub name: String,
    /// The amount, written as upstream writes it.
    pub written: ApiQuantity,
    /// The amount.
    pub value: Quantity,
}

fn value(q: &ApiQuantity) -> Option<Quantity> {
    Quantity::parse(&q.0).ok()
}

/// Whether `device` is allocated more than once while `sharing` allows it.
pub fn multiple(device: &Device, sharing: Sharing) -> bool {
    sharing.consumable && device.allow_multiple_allocations == Some(true)
}

/// Whether the request names a capacity the device does not have.
fn names_missing(requested: Option<&CapacityRequirements>, device: &Device) -> bool {
    requested.is_some_and(|r| r.requests.keys().any(|n| !device.capacity.contains_key(n)))
}

/// Whether a request fits a device allocated whole: every capacity it names exists and is at
/// least the amount asked.
pub fn fits_whole(requested: Option<&CapacityRequirements>, device: &Device) -> bool {
    if names_missing(requested, device) {
        return false;
    }
    requested
        .into_iter()
        .flat_map(|r| &r.requests)
        .all(|(name, amount)| {
            match (
                value(amount),
                device.capacity.get(name).and_then(|c| value(&c.value)),
            ) {
                (Some(amount), Some(total)) => amount <= total,
                _ => false,
            }
        })
}

/// What one allocation of the multi-allocation `device` consumes of each of its capacities,
/// or `None` when the request names a capacity the device lacks, an amount does not parse or a
/// policy refuses the rounded amount.
pub fn consumption(
    requested: Option<&CapacityRequirements>,
    device: &Device,
) -> Option<Vec<Consumed>> {
    if names_missing(requested, device) {
        return None;
    }
    device
        .capacity
        .iter()
        .map(|(name, capacity)| {
            let asked = requested.and_then(|r| r.requests.get(name));
            let (amount, binary) = consumed(asked, capacity)?;
            if violates(amount, capacity.request_policy.as_ref())? {
                return None;
            }
            Some(Consumed {
                name: name.clone(),
                written: ApiQuantity(canonical(amount, binary)),
                value: amount,
            })
        })
        .collect()
}

/// Whether `consumed` fits `device` besides what its other allocations hold (`held`).
pub fn fits_capacity(consumed: &[Consumed], device: &Device, held: &Amounts) -> bool {
    consumed.iter().all(|c| {
        let total = device.capacity.get(&c.name).and_then(|d| value(&d.value));
        let held = held.get(&c.name).map_or(0, |q| q.nanos());
        total.is_some_and(|total| held + c.value.nanos() <= total.nanos())
    })
}

/// `calculateConsumedCapacity`: the amount and whether it is written with a binary suffix.
fn consumed(asked: Option<&ApiQuantity>, capacity: &DeviceCapacity) -> Option<(Quantity, bool)> {
    let policy = capacity.request_policy.as_ref();
    let Some(asked) = asked else {
        let fill = policy
            .and_then(|p| p.default.as_ref())
            .unwrap_or(&capacity.value);
        return Some((value(fill)?, binary(fill)));
    };
    let amount = value(asked)?;
    let Some(policy) = policy else {
        return Some((amount, binary(asked)));
    };
    if let Some(range) = policy.valid_range.as_ref().filter(|r| r.min.is_some()) {
        return round_up_range(amount, asked, range);
    }
    if !policy.valid_values.is_empty() {
        return Some(round_up_valid_values(amount, asked, &policy.valid_values));
    }
    Some((amount, binary(asked)))
}

/// `roundUpRange`: below `min`, `min`; with a `step`, the next `min + n·step` at or above the
/// amount, in whole units and written as the step is.
fn round_up_range(
    amount: Quantity,
    asked: &ApiQuantity,
    range: &CapacityRequestPolicyRange,
) -> Option<(Quantity, bool)> {
    let min_written = range.min.as_ref()?;
    let min = value(min_written)?;
    if amount < min {
        return Some((min, binary(min_written)));
    }
    let Some(step_written) = &range.step else {
        return Some((amount, binary(asked)));
    };
    // Upstream rounds the whole values (`Value()` rounds up).
    let whole = whole_units;
    let (step, min) = (whole(value(step_written)?), whole(min));
    if step <= 0 {
        return Some((amount, binary(asked)));
    }
    let added = whole(amount) - min;
    let steps = added / step + i128::from(added % step != 0);
    Some((
        Quantity::from_nanos((min + step * steps) * NANO),
        binary(step_written),
    ))
}

/// `roundUpValidValues`: the first valid value at or above the amount, else the amount.
fn round_up_valid_values(
    amount: Quantity,
    asked: &ApiQuantity,
    valid: &[ApiQuantity],
) -> (Quantity, bool) {
    valid
        .iter()
        .find_map(|v| value(v).filter(|q| amount <= *q).map(|q| (q, binary(v))))
        .unwrap_or((amount, binary(asked)))
}

/// `violatesPolicy`: above the range's `max`, off its steps, or not a valid value (the
/// `default` always passes). `None` when the policy does not parse.
fn violates(amount: Quantity, policy: Option<&CapacityRequestPolicy>) -> Option<bool> {
    let Some(policy) = policy else {
        return Some(false);
    };
    if policy.default.as_ref().and_then(value) == Some(amount) {
        return Some(false);
    }
    if let Some(range) = &policy.valid_range {
        if let Some(max) = &range.max {
            if amount > value(max)? {
                return Some(true);
            }
        }
        if let (Some(step), Some(min)) = (&range.step, &range.min) {
            let whole = whole_units;
            let step = whole(value(step)?);
            return Some(step > 0 && (whole(amount) - whole(value(min)?)) % step != 0);
        }
        return Some(false);
    }
    if !policy.valid_values.is_empty() {
        let mut valid = policy.valid_values.iter().filter_map(value);
        return Some(!valid.any(|v| v == amount));
    }
    Some(false)
}

/// Nano units per unit.
const NANO: i128 = 1_000_000_000;

/// The value in whole units, rounded up as `Quantity.Value()` rounds.
fn whole_units(q: Quantity) -> i128 {
    let nanos = q.nanos();
    nanos / NANO + i128::from(nanos % NANO > 0)
}

/// Whether a quantity is written with a binary suffix (its format is `BinarySI`).
fn binary(q: &ApiQuantity) -> bool {
    q.0.trim_end().ends_with('i')
}

/// The canonical text of an amount as the apiserver writes it: whole values with the largest
/// suffix that divides them (binary or decimal by format), fractions in `m`, `u` or `n`.
pub fn canonical(amount: Quantity, binary: bool) -> String {
    let nanos = amount.nanos();
    if nanos % NANO != 0 {
        for (unit, suffix) in [(1_000_000, "m"), (1_000, "u"), (1, "n")] {
            if nanos % unit == 0 {
                return format!("{}{suffix}", nanos / unit);
            }
        }
    }
    let whole = nanos / NANO;
    let suffixes: &[(i128, &str)] = if binary {
        &[
            (1 << 60, "Ei"),
            (1 << 50, "Pi"),
            (1 << 40, "Ti"),
            (1 << 30, "Gi"),
            (1 << 20, "Mi"),
            (1 << 10, "Ki"),
        ]
    } else {
        &[
            (1_000_000_000_000_000_000, "E"),
            (1_000_000_000_000_000, "P"),
            (1_000_000_000_000, "T"),
            (1_000_000_000, "G"),
            (1_000_000, "M"),
            (1_000, "k"),
        ]
    };
    for (unit, suffix) in suffixes {
        if whole != 0 && whole % unit == 0 {
            return format!("{}{suffix}", whole / unit);
        }
    }
    whole.to_string()
}

/// What `device` consumes of each counter set, by set then counter; `None` when an amount does
/// not parse.
pub fn counters_of(device: &Device) -> Option<Vec<(&str, &str, Quantity)>> {
    device
        .consumes_counters
        .iter()
        .flat_map(|set| {
            set.counters.iter().map(move |(name, c)| {
                Some((set.counter_set.as_str(), name.as_str(), value(&c.value)?))
            })
        })
        .collect()
}

/// The value of a counter amount as written in a slice.
pub fn counter_value(q: &ApiQuantity) -> Option<Quantity> {
    value(q)
}

#[cfg(test)]
mod tests;
