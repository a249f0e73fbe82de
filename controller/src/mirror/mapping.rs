//! The pure part of the v1 mirror: this driver's `resource.k8s.io/v1` ResourceSlices turned into
//! the ledger's devices per node, a claim's allocation of our devices turned into the ledger's
//! [`ImportRequest`] (its admin access apart, see [`super::admin_access`]), and what the ledger
//! must do so that it holds what a claim shows
//! ([`steps_for`], [`plan`]), with the drift each difference counts as.
//!
//! No I/O: the watch and the ledger calls are in the sibling modules. An attribute or capacity
//! that does not convert is dropped from its device and reported, never a panic.

use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::capacity::NodeParts;
use dra_allocator::ledger::{
    same_placement, AdminAccess, AdminAccessRequest, Allocation, ClaimRef, DeviceHealth,
    ImportRequest,
};
use dra_allocator::model::{AttributeValue, Device, Quantity, Sharing, Version};
use dra_node::v1::config::{config_for, our_configs};
use dra_types::resource_v1::{
    DeviceAttribute, DeviceRequestAllocationResult, ResourceClaim, ResourceSlice,
};

use super::admin_access::{admin_steps_for, AdminSteps};
use crate::driver::inventory::SkippedAttribute;
use crate::driver::DriftKind;

/// The devices our slices publish, as the ledger records them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SliceInventory {
    /// The devices of each node, in slice and device order.
    pub devices: BTreeMap<String, Vec<Device>>,
    /// The node of each pool (the agent names a pool after its node).
    pub pools: BTreeMap<String, String>,
    /// Attributes and capacities that were dropped because they do not convert.
    pub skipped: Vec<SkippedAttribute>,
    /// The devices each node's slices taint unhealthy (see [`super::health`]), by device.
    pub health: BTreeMap<String, BTreeMap<String, DeviceHealth>>,
    /// The physical units of each node and how its devices sit on them (see [`super::parts`]).
    pub parts: BTreeMap<String, NodeParts>,
}

impl SliceInventory {
    /// The node of the devices of pool `pool`: the node its slices name, else the pool's name.
    pub fn node_of<'a>(&'a self, pool: &'a str) -> &'a str {
        self.pools.get(pool).map_or(pool, String::as_str)
    }

    /// The devices the slices publish on `node` (none for a node without slices).
    pub fn devices_of(&self, node: &str) -> Vec<Device> {
        self.devices.get(node).cloned().unwrap_or_default()
    }

    /// Whether a slice publishes device `device` on `node`.
    pub fn publishes(&self, node: &str, device: &str) -> bool {
        self.devices
            .get(node)
            .is_some_and(|devices| devices.iter().any(|d| d.name == device))
    }
}

/// The inventory of `driver` from `slices`: slices of other drivers and slices without
/// `nodeName` are left out, and of each pool only the slices of its highest generation count (as
/// for the scheduler). A device name that appears twice on one node keeps its first entry.
pub fn slice_inventory<'a>(
    driver: &str,
    slices: impl IntoIterator<Item = &'a ResourceSlice>,
) -> SliceInventory {
    let ours: Vec<&ResourceSlice> = slices
        .into_iter()
        .filter(|s| s.spec.driver == driver)
        .filter(|s| s.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()))
        .collect();
    let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
    for slice in &ours {
        let generation = newest
            .entry(slice.spec.pool.name.as_str())
            .or_insert(i64::MIN);
        *generation = (*generation).max(slice.spec.pool.generation);
    }
    let mut inventory = SliceInventory::default();
    let mut by_node: BTreeMap<String, Vec<&ResourceSlice>> = BTreeMap::new();
    for slice in ours {
        let pool = &slice.spec.pool;
        if newest.get(pool.name.as_str()) != Some(&pool.generation) {
            continue;
        }
        let node = slice.spec.node_name.clone().unwrap_or_default();
        inventory.pools.insert(pool.name.clone(), node.clone());
        by_node.entry(node.clone()).or_default().push(slice);
        let devices = inventory.devices.entry(node.clone()).or_default();
        for published in &slice.spec.devices {
            if published.name.is_empty() || devices.iter().any(|d| d.name == published.name) {
                continue;
            }
            let (device, skipped) = device(driver, &node, published);
            if let Some(health) = super::health::unhealthy_taint(driver, published) {
                inventory
                    .health
                    .entry(node.clone())
                    .or_default()
                    .insert(published.name.clone(), health);
            }
            devices.push(device);
            inventory.skipped.extend(skipped);
        }
    }
    inventory.parts = by_node
        .into_iter()
        .map(|(node, slices)| {
            let parts = super::parts::node_parts(driver, &slices);
            (node, parts)
        })
        .collect();
    inventory
}

/// The attribute or capacity name as the ledger keeps it: names in our driver's domain lose the
/// domain (`gpu.dra-ledger.io/model` is `model`, as a bare name means the same), others keep it.
pub(super) fn local_name(driver: &str, name: &str) -> String {
    name.strip_prefix(driver)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(name)
        .to_owned()
}

/// One published device: attributes as they are (versions parsed), capacities as quantities.
fn device(
    driver: &str,
    node: &str,
    published: &dra_types::resource_v1::Device,
) -> (Device, Vec<SkippedAttribute>) {
    let mut device = Device::new(&published.name);
    let mut skipped = Vec::new();
    let mut skip = |attribute: &str, reason: String| {
        skipped.push(SkippedAttribute {
            node: node.to_owned(),
            device: published.name.clone(),
            attribute: attribute.to_owned(),
            reason,
        });
    };
    for (name, value) in &published.attributes {
        let value = match value {
            DeviceAttribute::Int(i) => AttributeValue::Int(*i),
            DeviceAttribute::Bool(b) => AttributeValue::Bool(*b),
            DeviceAttribute::String(s) => AttributeValue::String(s.clone()),
            DeviceAttribute::Version(v) => match Version::parse(v) {
                Ok(version) => AttributeValue::Version(version),
                Err(error) => {
                    skip(name, error.to_string());
                    continue;
                }
            },
        };
        device.attributes.insert(local_name(driver, name), value);
    }
    for (name, capacity) in &published.capacity {
        let local = local_name(driver, name);
        if device.attributes.contains_key(&local) {
            skip(name, "an attribute of the same name is kept".to_owned());
            continue;
        }
        match Quantity::parse(&capacity.value.0) {
            Ok(quantity) => {
                device
                    .attributes
                    .insert(local, AttributeValue::Quantity(quantity));
            }
            Err(error) => skip(name, error.to_string()),
        }
    }
    (device, skipped)
}

/// What the ledger should hold for one claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimMirror {
    /// Our allocation as the ledger records it; `None` when the claim holds none of our devices
    /// (unallocated, other drivers only, admin access only) or when it cannot be recorded.
    pub allocation: Option<ImportRequest>,
    /// The claim's admin access to our devices (its results with `adminAccess: true`), limited
    /// to the devices the slices publish; `None` when it has none (see [`super::admin_access`]).
    pub admin_access: Option<AdminAccessRequest>,
    /// The devices (`node/device`) of the claim's admin access that no slice publishes, left
    /// out of `admin_access` (the ledger records admin access only to devices it holds).
    pub admin_unpublished: Vec<String>,
    /// What in our part of the allocation could not be read, for the log and the drift report
    /// (`bad_handle_data`): configuration that does not parse (the allocation is still recorded,
    /// exclusive), or devices in the pools of several nodes (not recorded).
    pub problem: Option<String>,
}

/// The node and the distinct devices of `results`, one node's; or why not (several nodes).
pub(super) fn placement(
    results: &[&DeviceRequestAllocationResult],
    inventory: &SliceInventory,
    driver: &str,
    claim: &str,
) -> Result<(String, Vec<String>), String> {
    let nodes: BTreeSet<&str> = results.iter().map(|r| inventory.node_of(&r.pool)).collect();
    if nodes.len() > 1 {
        let nodes: Vec<&str> = nodes.into_iter().collect();
        return Err(format!(
            "claim {claim}: devices of {driver} on several nodes ({}); the ledger holds a \
             claim's devices on one node",
            nodes.join(", ")
        ));
    }
    let node = nodes.into_iter().next().unwrap_or_default().to_owned();
    let mut devices: Vec<String> = Vec::with_capacity(results.len());
    for result in results {
        if !devices.contains(&result.device) {
            devices.push(result.device.clone());
        }
    }
    Ok((node, devices))
}

/// What `claim` holds of `driver`'s devices, and, apart, what it has admin access to:
/// admin-access results do not keep a device from other claims, so they are no part of the
/// allocation. The node is the one `inventory` knows for the results' pool.
pub fn claim_mirror(
    claim: &ResourceClaim,
    driver: &str,
    inventory: &SliceInventory,
) -> ClaimMirror {
    let Some(uid) = claim.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
        return ClaimMirror::default();
    };
    let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) else {
        return ClaimMirror::default();
    };
    let results = &allocation.devices;
    let (ours, admin): (Vec<_>, Vec<_>) = results
        .results
        .iter()
        .filter(|r| r.driver == driver)
        .partition(|r| r.admin_access != Some(true));
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let claim_ref = ClaimRef::new(uid, &namespace, &name);
    let full_name = format!("{namespace}/{name}");
    let mut mirror = super::admin_access::admin_mirror(&admin, inventory, driver, &claim_ref);
    if ours.is_empty() {
        return mirror;
    }
    let (node, devices) = match placement(&ours, inventory, driver, &full_name) {
        Ok(placed) => placed,
        Err(problem) => {
            mirror.problem = Some(join_problems(mirror.problem.take(), problem));
            return mirror;
        }
    };
    let (sharing, problem) = match our_configs(results, driver) {
        Ok(configs) => {
            let mut sharings = ours
                .iter()
                .map(|r| config_for(&r.request, &configs).sharing);
            let first = sharings.next().unwrap_or_default();
            if sharings.all(|s| s == first) {
                (first, None)
            } else {
                (
                    Sharing::Exclusive,
                    Some(format!(
                        "claim {full_name}: its requests are configured with different \
                         sharing; recorded as exclusive"
                    )),
                )
            }
        }
        Err(error) => (
            Sharing::Exclusive,
            Some(format!("claim {full_name}: {error}; recorded as exclusive")),
        ),
    };
    if let Some(problem) = problem {
        mirror.problem = Some(join_problems(mirror.problem.take(), problem));
    }
    let parts = inventory.parts.get(&node);
    let sharing = super::parts::multi_allocation_sharing(parts, &devices).unwrap_or(sharing);
    let share_permille =
        super::parts::share_permille(parts, &super::parts::holds(driver, uid, &ours));
    mirror.allocation = Some(ImportRequest {
        claim: claim_ref,
        pod_uid: None,
        node,
        devices,
        sharing,
        share_permille,
    });
    mirror
}

/// `first` and `then` in one line.
fn join_problems(first: Option<String>, then: String) -> String {
    match first {
        Some(first) => format!("{first}; {then}"),
        None => then,
    }
}

/// The devices of `allocation` that no slice of `inventory` publishes on its node.
pub fn unpublished<'a>(allocation: &'a ImportRequest, inventory: &SliceInventory) -> Vec<&'a str> {
    allocation
        .devices
        .iter()
        .filter(|d| !inventory.publishes(&allocation.node, d))
        .map(String::as_str)
        .collect()
}

/// Whether the ledger's allocation is the one the claim shows: same node, same set of devices.
pub fn same_allocation(held: &Allocation, shown: &ImportRequest) -> bool {
    same_placement(&held.node, &held.devices, &shown.node, &shown.devices)
}

/// What the ledger does for one claim so that it holds what the claim shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Steps {
    /// Release the claim's allocation first.
    pub release: bool,
    /// Then record this allocation.
    pub import: Option<ImportRequest>,
    /// What the difference counts as when a reconcile finds it.
    pub drift: Option<DriftKind>,
}

/// The steps from `held` (the ledger's allocation of the claim) to `shown` (what the claim
/// shows): nothing when they agree, an import when only the claim has one, a release when only
/// the ledger has one, both when they differ (the claim wins).
pub fn steps_for(held: Option<&Allocation>, shown: Option<&ImportRequest>) -> Steps {
    match (held, shown) {
        (None, None) => Steps::default(),
        (Some(held), Some(shown)) if same_allocation(held, shown) => Steps::default(),
        (None, Some(shown)) => Steps {
            release: false,
            import: Some(shown.clone()),
            drift: Some(DriftKind::MissingInLedger),
        },
        (Some(_), None) => Steps {
            release: true,
            import: None,
            drift: Some(DriftKind::OrphanInLedger),
        },
        (Some(_), Some(shown)) => Steps {
            release: true,
            import: Some(shown.clone()),
            drift: Some(DriftKind::DeviceMismatch),
        },
    }
}

/// The repairs of a reconcile, by claim UID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The steps of each claim whose allocation differs.
    pub steps: BTreeMap<String, Steps>,
    /// The steps of each claim whose admin access differs.
    pub admin: BTreeMap<String, AdminSteps>,
    /// Claims whose latest change the watch has not delivered yet: left for it.
    pub in_flight: u64,
}

/// Compares the ledger's `held` allocations and `held_admin` admin access with the `shown`
/// claims (by UID; a claim missing from `shown` is gone). Claims in `unsettled` are skipped: the
/// listing is newer than what the watch delivered, and the watch will bring the change.
pub fn plan(
    held: &[Allocation],
    held_admin: &[AdminAccess],
    shown: &BTreeMap<String, ClaimMirror>,
    unsettled: &BTreeSet<String>,
) -> Plan {
    let held: BTreeMap<&str, &Allocation> =
        held.iter().map(|a| (a.claim.uid.as_str(), a)).collect();
    let held_admin: BTreeMap<&str, &AdminAccess> = held_admin
        .iter()
        .map(|a| (a.claim.uid.as_str(), a))
        .collect();
    let uids: BTreeSet<&str> = held
        .keys()
        .chain(held_admin.keys())
        .copied()
        .chain(shown.keys().map(String::as_str))
        .collect();
    let mut plan = Plan::default();
    for uid in uids {
        let mirror = shown.get(uid);
        let steps = steps_for(
            held.get(uid).copied(),
            mirror.and_then(|m| m.allocation.as_ref()),
        );
        let admin = admin_steps_for(
            held_admin.get(uid).copied(),
            mirror.and_then(|m| m.admin_access.as_ref()),
        );
        if steps == Steps::default() && admin == AdminSteps::default() {
            continue;
        }
        if unsettled.contains(uid) {
            plan.in_flight += 1;
            continue;
        }
        if steps != Steps::default() {
            plan.steps.insert(uid.to_owned(), steps);
        }
        if admin != AdminSteps::default() {
            plan.admin.insert(uid.to_owned(), admin);
        }
    }
    plan
}

#[cfg(test)]
pub(super) mod tests;
