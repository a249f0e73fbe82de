use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::ledger::{Allocation, AllocationState, ClaimRef, ImportRequest};
use dra_allocator::model::{AttributeValue, Quantity as ModelQuantity, Sharing, Version};
use dra_types::resource_v1::{
    Device as SliceDevice, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceAttribute,
    DeviceCapacity, DeviceRequestAllocationResult, ResourceClaim, ResourcePool, ResourceSlice,
    ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::*;

pub(in crate::mirror) const DRIVER: &str = "gpu.dra-ledger.io";

pub(in crate::mirror) fn gpu(name: &str) -> SliceDevice {
    SliceDevice {
        name: name.to_owned(),
        ..SliceDevice::default()
    }
}

pub(in crate::mirror) fn slice(
    node: &str,
    pool: &str,
    generation: i64,
    devices: Vec<SliceDevice>,
) -> ResourceSlice {
    ResourceSlice::new(
        ObjectMeta {
            name: Some(format!("{node}-{generation}")),
            ..ObjectMeta::default()
        },
        ResourceSliceSpec {
            driver: DRIVER.to_owned(),
            pool: ResourcePool {
                name: pool.to_owned(),
                generation,
                resource_slice_count: 1,
            },
            node_name: Some(node.to_owned()),
            devices,
            ..ResourceSliceSpec::default()
        },
    )
}

pub(in crate::mirror) fn inventory_of(slices: &[ResourceSlice]) -> SliceInventory {
    slice_inventory(DRIVER, slices)
}

/// Claim `ns/name` with uid `uid` allocated to `devices` (request, pool, device) of `driver`.
pub(in crate::mirror) fn claim(uid: &str, results: &[(&str, &str, &str, &str)]) -> ResourceClaim {
    ResourceClaim::new("ns", &format!("claim-{uid}"), uid).allocated(DeviceAllocationResult {
        results: results
            .iter()
            .map(|(request, driver, pool, device)| {
                DeviceRequestAllocationResult::new(request, driver, pool, device)
            })
            .collect(),
        config: Vec::new(),
    })
}

fn with_config(mut claim: ResourceClaim, config: DeviceAllocationConfiguration) -> ResourceClaim {
    if let Some(allocation) = claim.status.as_mut().and_then(|s| s.allocation.as_mut()) {
        allocation.devices.config.push(config);
    }
    claim
}

fn shared(max: u32) -> serde_json::Value {
    json!({"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceConfig",
           "sharing": {"mode": "Shared", "maxConsumers": max}})
}

fn import(uid: &str, node: &str, devices: &[&str]) -> ImportRequest {
    ImportRequest {
        claim: ClaimRef::new(uid, "ns", format!("claim-{uid}")),
        pod_uid: None,
        node: node.to_owned(),
        devices: devices.iter().map(|d| (*d).to_owned()).collect(),
        sharing: Sharing::Exclusive,
        share_permille: BTreeMap::new(),
    }
}

pub(in crate::mirror) fn held(uid: &str, node: &str, devices: &[&str]) -> Allocation {
    let request = import(uid, node, devices);
    Allocation {
        claim: request.claim,
        pod_uid: None,
        node: request.node,
        devices: request.devices,
        sharing: Sharing::Exclusive,
        state: AllocationState::Confirmed,
        intent: 1,
        created_ms: 0,
        updated_ms: 0,
    }
}

#[test]
fn slice_attributes_and_capacity_become_ledger_attributes_without_our_domain() {
    let mut device = gpu("gpu-0");
    device.attributes = [
        ("model", DeviceAttribute::String("H100".into())),
        ("gpu.dra-ledger.io/numa", DeviceAttribute::Int(1)),
        ("migEnabled", DeviceAttribute::Bool(false)),
        (
            "driverVersion",
            DeviceAttribute::Version("550.54.15".into()),
        ),
        ("example.com/index", DeviceAttribute::Int(7)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    device.capacity.insert(
        "memory".into(),
        DeviceCapacity::new(Quantity("80Gi".into())),
    );
    let inventory = inventory_of(&[slice("node-0", "node-0", 1, vec![device, gpu("gpu-1")])]);
    assert!(inventory.skipped.is_empty(), "{:?}", inventory.skipped);
    let devices = &inventory.devices["node-0"];
    assert_eq!(devices.len(), 2);
    let attributes = &devices[0].attributes;
    assert_eq!(attributes["model"], AttributeValue::String("H100".into()));
    assert_eq!(attributes["numa"], AttributeValue::Int(1));
    assert_eq!(attributes["migEnabled"], AttributeValue::Bool(false));
    assert_eq!(
        attributes["driverVersion"],
        AttributeValue::Version(Version::parse("550.54.15").unwrap())
    );
    assert_eq!(attributes["example.com/index"], AttributeValue::Int(7));
    assert_eq!(
        attributes["memory"],
        AttributeValue::Quantity(ModelQuantity::parse("80Gi").unwrap())
    );
    assert!(devices[1].attributes.is_empty());
    assert_eq!(inventory.pools["node-0"], "node-0");
}

#[test]
fn values_that_do_not_convert_are_dropped_and_reported() {
    let mut device = gpu("gpu-0");
    device.attributes.insert(
        "driverVersion".into(),
        DeviceAttribute::Version("x.y".into()),
    );
    device
        .attributes
        .insert("model".into(), DeviceAttribute::String("A".into()));
    device.capacity.insert(
        "memory".into(),
        DeviceCapacity::new(Quantity("lots".into())),
    );
    device
        .capacity
        .insert("model".into(), DeviceCapacity::new(Quantity("1".into())));
    let inventory = inventory_of(&[slice("node-0", "node-0", 1, vec![device])]);
    let attributes = &inventory.devices["node-0"][0].attributes;
    assert_eq!(
        attributes.keys().collect::<Vec<_>>(),
        ["model"],
        "{attributes:?}"
    );
    let skipped: BTreeSet<&str> = inventory
        .skipped
        .iter()
        .map(|s| s.attribute.as_str())
        .collect();
    assert_eq!(
        skipped,
        BTreeSet::from(["driverVersion", "memory", "model"])
    );
    assert!(inventory
        .skipped
        .iter()
        .all(|s| s.node == "node-0" && s.device == "gpu-0"));
}

#[test]
fn only_our_slices_of_the_newest_pool_generation_count() {
    let mut other = slice("node-0", "node-0", 5, vec![gpu("nic-0")]);
    other.spec.driver = "nic.example.com".into();
    let mut no_node = slice("node-9", "shared", 1, vec![gpu("gpu-9")]);
    no_node.spec.node_name = None;
    let inventory = inventory_of(&[
        slice("node-0", "node-0", 1, vec![gpu("gpu-old")]),
        slice("node-0", "node-0", 2, vec![gpu("gpu-0"), gpu("gpu-0")]),
        slice("node-1", "node-1", 1, vec![gpu("gpu-0")]),
        other,
        no_node,
    ]);
    let names = |node: &str| -> Vec<&str> {
        inventory.devices[node]
            .iter()
            .map(|d| d.name.as_str())
            .collect()
    };
    assert_eq!(names("node-0"), ["gpu-0"]);
    assert_eq!(names("node-1"), ["gpu-0"]);
    assert_eq!(inventory.devices.len(), 2);
}

#[test]
fn an_allocated_claim_becomes_an_import_on_the_node_of_its_pool() {
    let inventory = inventory_of(&[slice("node-a", "pool-a", 1, vec![gpu("gpu-0")])]);
    let claim = claim(
        "u1",
        &[
            ("gpu", DRIVER, "pool-a", "gpu-0"),
            ("gpu", DRIVER, "pool-a", "gpu-1"),
            ("nic", "nic.example.com", "pool-a", "nic-0"),
        ],
    );
    let mirror = claim_mirror(&claim, DRIVER, &inventory);
    assert_eq!(mirror.problem, None);
    assert_eq!(
        mirror.allocation,
        Some(import("u1", "node-a", &["gpu-0", "gpu-1"]))
    );
    // A pool no slice names is taken as the node's name, as the agent names its pool.
    let elsewhere = claim_mirror(
        &self::claim("u2", &[("gpu", DRIVER, "node-b", "gpu-3")]),
        DRIVER,
        &inventory,
    );
    assert_eq!(elsewhere.allocation.unwrap().node, "node-b");
}

#[test]
fn unallocated_foreign_and_admin_access_claims_hold_no_allocation() {
    let inventory = SliceInventory::default();
    let unallocated = ResourceClaim::new("ns", "c", "u1");
    assert_eq!(
        claim_mirror(&unallocated, DRIVER, &inventory),
        ClaimMirror::default()
    );
    let foreign = claim("u2", &[("nic", "nic.example.com", "node-0", "nic-0")]);
    assert_eq!(
        claim_mirror(&foreign, DRIVER, &inventory),
        ClaimMirror::default()
    );
    let mut admin = claim("u3", &[("gpu", DRIVER, "node-0", "gpu-0")]);
    if let Some(allocation) = admin.status.as_mut().and_then(|s| s.allocation.as_mut()) {
        allocation.devices.results[0].admin_access = Some(true);
    }
    let admin = claim_mirror(&admin, DRIVER, &inventory);
    assert_eq!(admin.allocation, None);
    assert_eq!(admin.problem, None);
}

#[test]
fn sharing_comes_from_our_opaque_config() {
    let inventory = SliceInventory::default();
    let claim = with_config(
        claim("u1", &[("gpu", DRIVER, "node-0", "gpu-0")]),
        DeviceAllocationConfiguration::opaque("FromClaim", &["gpu"], DRIVER, shared(4)),
    );
    let mirror = claim_mirror(&claim, DRIVER, &inventory);
    assert_eq!(mirror.problem, None);
    assert_eq!(
        mirror.allocation.unwrap().sharing,
        Sharing::Shared { max_consumers: 4 }
    );
    // Another driver's config is not ours to read.
    let foreign = with_config(
        self::claim("u2", &[("gpu", DRIVER, "node-0", "gpu-0")]),
        DeviceAllocationConfiguration::opaque(
            "FromClaim",
            &[],
            "nic.example.com",
            json!({"whatever": 1}),
        ),
    );
    let mirror = claim_mirror(&foreign, DRIVER, &inventory);
    assert_eq!(mirror.problem, None);
    assert_eq!(mirror.allocation.unwrap().sharing, Sharing::Exclusive);
}

#[test]
fn unreadable_config_is_recorded_exclusive_with_a_problem_naming_the_field() {
    let claim = with_config(
        claim("u1", &[("gpu", DRIVER, "node-0", "gpu-0")]),
        DeviceAllocationConfiguration::opaque("FromClaim", &[], DRIVER, json!({"kind": "Gpu"})),
    );
    let mirror = claim_mirror(&claim, DRIVER, &SliceInventory::default());
    assert_eq!(mirror.allocation.unwrap().sharing, Sharing::Exclusive);
    let problem = mirror.problem.unwrap();
    assert!(
        problem.contains("ns/claim-u1") && problem.contains("opaque.parameters"),
        "{problem}"
    );
}

#[test]
fn devices_on_several_nodes_are_a_problem_and_not_recorded() {
    let claim = claim(
        "u1",
        &[
            ("a", DRIVER, "node-0", "gpu-0"),
            ("b", DRIVER, "node-1", "gpu-0"),
        ],
    );
    let mirror = claim_mirror(&claim, DRIVER, &SliceInventory::default());
    assert_eq!(mirror.allocation, None);
    assert!(
        mirror.problem.unwrap().contains("node-0, node-1"),
        "names the nodes"
    );
}

#[test]
fn devices_no_slice_publishes_are_unpublished() {
    let inventory = inventory_of(&[slice("node-0", "node-0", 1, vec![gpu("gpu-0")])]);
    let request = import("u1", "node-0", &["gpu-0", "gpu-7"]);
    assert_eq!(unpublished(&request, &inventory), ["gpu-7"]);
    let elsewhere = import("u2", "node-9", &["gpu-0"]);
    assert_eq!(unpublished(&elsewhere, &inventory), ["gpu-0"]);
}

#[test]
fn steps_import_release_or_replace_and_nothing_for_the_same_allocation() {
    let shown = import("u1", "node-0", &["gpu-0", "gpu-1"]);
    let same = held("u1", "node-0", &["gpu-1", "gpu-0"]);
    assert_eq!(steps_for(Some(&same), Some(&shown)), Steps::default());
    assert_eq!(steps_for(None, None), Steps::default());
    assert_eq!(
        steps_for(None, Some(&shown)),
        Steps {
            release: false,
            import: Some(shown.clone()),
            drift: Some(DriftKind::MissingInLedger)
        }
    );
    assert_eq!(
        steps_for(Some(&same), None),
        Steps {
            release: true,
            import: None,
            drift: Some(DriftKind::OrphanInLedger)
        }
    );
    for other in [
        held("u1", "node-0", &["gpu-0"]),
        held("u1", "node-1", &["gpu-0", "gpu-1"]),
    ] {
        assert_eq!(
            steps_for(Some(&other), Some(&shown)),
            Steps {
                release: true,
                import: Some(shown.clone()),
                drift: Some(DriftKind::DeviceMismatch)
            }
        );
    }
}

#[test]
fn a_plan_repairs_every_difference_and_leaves_unsettled_claims_to_the_watch() {
    let ledger = vec![
        held("gone", "node-0", &["gpu-0"]),
        held("same", "node-0", &["gpu-1"]),
        held("moved", "node-0", &["gpu-2"]),
        held("late", "node-0", &["gpu-3"]),
    ];
    let mirror = |request: Option<ImportRequest>| ClaimMirror {
        allocation: request,
        ..ClaimMirror::default()
    };
    let shown = BTreeMap::from([
        (
            "same".to_owned(),
            mirror(Some(import("same", "node-0", &["gpu-1"]))),
        ),
        (
            "moved".to_owned(),
            mirror(Some(import("moved", "node-1", &["gpu-2"]))),
        ),
        (
            "new".to_owned(),
            mirror(Some(import("new", "node-1", &["gpu-0"]))),
        ),
        ("unallocated".to_owned(), mirror(None)),
    ]);
    let unsettled = BTreeSet::from(["late".to_owned()]);
    let plan = plan(&ledger, &[], &shown, &unsettled);
    assert_eq!(plan.in_flight, 1);
    let drift: BTreeMap<&str, Option<DriftKind>> = plan
        .steps
        .iter()
        .map(|(uid, steps)| (uid.as_str(), steps.drift))
        .collect();
    assert_eq!(
        drift,
        BTreeMap::from([
            ("gone", Some(DriftKind::OrphanInLedger)),
            ("moved", Some(DriftKind::DeviceMismatch)),
            ("new", Some(DriftKind::MissingInLedger)),
        ])
    );
    assert!(plan.steps["moved"].release && plan.steps["moved"].import.is_some());
}
