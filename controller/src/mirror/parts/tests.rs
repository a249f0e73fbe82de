use std::collections::BTreeMap;

use dra_allocator::model::Quantity as ModelQuantity;
use dra_types::resource_v1::{
    Counter, CounterSet, Device as SliceDevice, DeviceAttribute, DeviceCapacity,
    DeviceCounterConsumption, DeviceRequestAllocationResult, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;
use crate::mirror::mapping::claim_mirror;
use crate::mirror::mapping::tests::{claim, gpu, inventory_of, slice, DRIVER};

fn q(text: &str) -> ModelQuantity {
    ModelQuantity::parse(text).expect("test quantity parses")
}

fn counters(pairs: &[(&str, &str)]) -> BTreeMap<String, Counter> {
    pairs
        .iter()
        .map(|(name, value)| {
            let counter = Counter {
                value: Quantity((*value).to_owned()),
            };
            ((*name).to_owned(), counter)
        })
        .collect()
}

fn with_model(mut device: SliceDevice, model: &str) -> SliceDevice {
    device.attributes.insert(
        format!("{DRIVER}/model"),
        DeviceAttribute::String(model.to_owned()),
    );
    device
}

/// A partition `name` of counter set `set` taking `memory` and `compute` slices.
fn partition(name: &str, set: &str, memory: &str, compute: &str) -> SliceDevice {
    let mut device = with_model(gpu(name), "H100");
    device.consumes_counters = vec![DeviceCounterConsumption {
        counter_set: set.to_owned(),
        counters: counters(&[("memory", memory), ("compute", compute)]),
    }];
    device
}

/// Node `node`'s pool: a slice with the counter set of one 80Gi, 7-slice GPU and a slice with
/// its seven `1g` partitions and its `7g` partition, as 1.36 wants them.
fn partitioned_node(node: &str) -> Vec<ResourceSlice> {
    let mut counter_slice = slice(node, node, 1, Vec::new());
    counter_slice.spec.shared_counters = vec![CounterSet {
        name: "gpu-0".to_owned(),
        counters: counters(&[("memory", "80Gi"), ("compute", "7")]),
    }];
    counter_slice.spec.pool.resource_slice_count = 2;
    let mut devices: Vec<SliceDevice> = (0..7)
        .map(|i| partition(&format!("gpu-0-1g-{i}"), "gpu-0", "10Gi", "1"))
        .collect();
    devices.push(partition("gpu-0-7g", "gpu-0", "80Gi", "7"));
    let mut device_slice = slice(node, node, 1, devices);
    device_slice.metadata.name = Some(format!("{node}-devices"));
    device_slice.spec.pool.resource_slice_count = 2;
    vec![counter_slice, device_slice]
}

/// A multi-allocation 80Gi GPU `gpu-0` beside a plain one, `gpu-1`.
fn shared_node(node: &str) -> ResourceSlice {
    let capacity = |device: SliceDevice| {
        let mut device = with_model(device, "H100");
        device.capacity.insert(
            format!("{DRIVER}/memory"),
            DeviceCapacity::new(Quantity("80Gi".to_owned())),
        );
        device
    };
    let mut shared = capacity(gpu("gpu-0"));
    shared.allow_multiple_allocations = Some(true);
    slice(node, node, 1, vec![shared, capacity(gpu("gpu-1"))])
}

fn result(device: &str, share: Option<(&str, &str)>) -> DeviceRequestAllocationResult {
    let mut result = DeviceRequestAllocationResult::new("gpu", DRIVER, "node-0", device);
    if let Some((share_id, memory)) = share {
        result.share_id = Some(share_id.to_owned());
        result
            .consumed_capacity
            .insert(format!("{DRIVER}/memory"), Quantity(memory.to_owned()));
    }
    result
}

#[test]
fn partitions_belong_to_the_counter_set_they_consume_from() {
    let inventory = inventory_of(&partitioned_node("node-0"));
    let parts = &inventory.parts["node-0"];
    assert_eq!(parts.units.len(), 1, "one GPU: {parts:?}");
    let gpu = &parts.units["gpu-0"];
    assert_eq!(gpu.model.as_deref(), Some("H100"));
    assert_eq!(gpu.totals["memory"], q("80Gi"));
    assert_eq!(gpu.totals["compute"], q("7"));
    let one_g = &parts.devices["gpu-0-1g-3"];
    assert_eq!(one_g.unit, "gpu-0");
    assert_eq!(one_g.takes["memory"], q("10Gi"));
    assert!(!one_g.multi_allocation);
    assert_eq!(parts.devices.len(), 8);
}

#[test]
fn seven_held_partitions_of_a_published_gpu_are_one_gpu_equivalent() {
    let inventory = inventory_of(&partitioned_node("node-0"));
    let results: Vec<DeviceRequestAllocationResult> = (0..7)
        .map(|i| result(&format!("gpu-0-1g-{i}"), None))
        .collect();
    let holds: Vec<_> = results
        .iter()
        .enumerate()
        .flat_map(|(i, r)| holds(DRIVER, &format!("claim-{i}"), &[r]))
        .collect();
    let utilisation = inventory.parts["node-0"].utilisation(&holds);
    assert!(
        (utilisation.total.equivalents - 1.0).abs() < 1e-9,
        "{utilisation:?}"
    );
    assert_eq!(utilisation.total.capacity["memory"].allocated, q("70Gi"));
}

#[test]
fn a_multi_allocation_device_is_its_own_unit_with_its_capacity() {
    let inventory = inventory_of(&[shared_node("node-0")]);
    let parts = &inventory.parts["node-0"];
    assert!(parts.devices["gpu-0"].multi_allocation);
    assert!(!parts.devices["gpu-1"].multi_allocation);
    assert_eq!(parts.devices["gpu-0"].capacity["memory"], q("80Gi"));
    assert_eq!(parts.units["gpu-0"].totals["memory"], q("80Gi"));
    assert_eq!(parts.units.len(), 2);
}

#[test]
fn results_with_consumed_capacity_are_shares_with_their_share_id() {
    let results = [result("gpu-0", Some(("a1", "40Gi"))), result("gpu-1", None)];
    let refs: Vec<&DeviceRequestAllocationResult> = results.iter().collect();
    let holds = holds(DRIVER, "uid-1", &refs);
    assert_eq!(holds.len(), 2);
    assert_eq!(holds[0].share_id.as_deref(), Some("a1"));
    assert_eq!(holds[0].consumed["memory"], q("40Gi"));
    assert!(holds[0].is_share());
    assert_eq!(holds[1], Hold::whole("uid-1", "gpu-1"));
}

#[test]
fn two_forty_gib_shares_of_a_published_eighty_gib_gpu_fill_it() {
    let inventory = inventory_of(&[shared_node("node-0")]);
    let first = result("gpu-0", Some(("a", "40Gi")));
    let second = result("gpu-0", Some(("b", "40Gi")));
    let mut all = holds(DRIVER, "claim-a", &[&first]);
    all.extend(holds(DRIVER, "claim-b", &[&second]));
    let utilisation = inventory.parts["node-0"].utilisation(&all);
    assert!(
        (utilisation.total.equivalents - 1.0).abs() < 1e-9,
        "{utilisation:?}"
    );
    let memory = utilisation.by_model["H100"].capacity["memory"];
    assert_eq!((memory.allocated, memory.total), (q("80Gi"), q("160Gi")));
}

#[test]
fn counter_sets_of_an_older_pool_generation_do_not_count() {
    let mut slices = partitioned_node("node-0");
    let mut newer = slice("node-0", "node-0", 2, vec![gpu("gpu-9")]);
    newer.metadata.name = Some("node-0-newer".to_owned());
    slices.push(newer);
    let inventory = inventory_of(&slices);
    let parts = &inventory.parts["node-0"];
    assert_eq!(
        parts.units.keys().collect::<Vec<_>>(),
        vec!["gpu-9"],
        "{parts:?}"
    );
}

#[test]
fn partitions_and_shares_are_imported_with_their_fraction_of_the_gpu() {
    let mut slices = partitioned_node("node-0");
    slices.push(shared_node("node-1"));
    let inventory = inventory_of(&slices);
    let imported = |claim: &dra_types::resource_v1::ResourceClaim| {
        claim_mirror(claim, DRIVER, &inventory)
            .allocation
            .expect("the claim holds our device")
            .share_permille
    };
    let one_g = claim("a", &[("gpu", DRIVER, "node-0", "gpu-0-1g-2")]);
    assert_eq!(
        imported(&one_g),
        BTreeMap::from([("gpu-0-1g-2".to_owned(), 143)])
    );
    let seven_g = claim("b", &[("gpu", DRIVER, "node-0", "gpu-0-7g")]);
    assert!(imported(&seven_g).is_empty(), "a whole GPU counts whole");

    let mut share = claim("c", &[("gpu", DRIVER, "node-1", "gpu-0")]);
    let results = &mut share
        .status
        .as_mut()
        .unwrap()
        .allocation
        .as_mut()
        .unwrap()
        .devices
        .results;
    results[0].share_id = Some("s1".to_owned());
    results[0]
        .consumed_capacity
        .insert("memory".to_owned(), Quantity("40Gi".to_owned()));
    assert_eq!(
        imported(&share),
        BTreeMap::from([("gpu-0".to_owned(), 500)])
    );
    let whole = claim("d", &[("gpu", DRIVER, "node-1", "gpu-1")]);
    assert!(imported(&whole).is_empty());
}

#[test]
fn claims_on_multi_allocation_devices_are_recorded_shared_without_a_bound() {
    let mut slices = partitioned_node("node-0");
    slices.push(shared_node("node-1"));
    let inventory = inventory_of(&slices);
    let sharing = |uid: &str, pool: &str, device: &str| {
        let mirror = claim_mirror(
            &claim(uid, &[("gpu", DRIVER, pool, device)]),
            DRIVER,
            &inventory,
        );
        mirror
            .allocation
            .expect("the claim holds our device")
            .sharing
    };
    let unbounded = Sharing::Shared {
        max_consumers: u32::MAX,
    };
    assert_eq!(sharing("a", "node-1", "gpu-0"), unbounded);
    assert_eq!(sharing("b", "node-1", "gpu-0"), unbounded);
    // A plain device and a partition are held alone, as the claim's own sharing says.
    assert_eq!(sharing("c", "node-1", "gpu-1"), Sharing::Exclusive);
    assert_eq!(sharing("d", "node-0", "gpu-0-1g-0"), Sharing::Exclusive);
    // A claim with a multi-allocation device and a plain one keeps its own sharing.
    let mixed = claim_mirror(
        &claim(
            "e",
            &[
                ("gpu", DRIVER, "node-1", "gpu-0"),
                ("gpu", DRIVER, "node-1", "gpu-1"),
            ],
        ),
        DRIVER,
        &inventory,
    );
    assert_eq!(
        mixed.allocation.expect("allocated").sharing,
        Sharing::Exclusive
    );
}

/// `claim(uid, ...)` on node-1's `gpu-0`, a share `share_id` consuming `memory`.
fn share_claim(uid: &str, share_id: &str, memory: &str) -> dra_types::resource_v1::ResourceClaim {
    let mut share = claim(uid, &[]);
    let results = &mut share
        .status
        .as_mut()
        .unwrap()
        .allocation
        .as_mut()
        .unwrap()
        .devices
        .results;
    let mut held = result("gpu-0", Some((share_id, memory)));
    held.pool = "node-1".to_owned();
    results.push(held);
    share
}

#[test]
fn the_capacity_view_shows_partitions_and_shares_with_the_claims_holding_them() {
    let mut slices = partitioned_node("node-0");
    slices.push(shared_node("node-1"));
    let inventory = inventory_of(&slices);
    let mut claims: Vec<_> = (0..7)
        .map(|i| {
            let device = format!("gpu-0-1g-{i}");
            claim(&format!("p{i}"), &[("gpu", DRIVER, "node-0", &device)])
        })
        .collect();
    claims.push(share_claim("s1", "share-1", "40Gi"));
    claims.push(share_claim("s2", "share-2", "40Gi"));
    // Admin access and another driver's results hold nothing of ours.
    let mut looking = claim("admin", &[("gpu", DRIVER, "node-1", "gpu-1")]);
    if let Some(allocation) = looking.status.as_mut().and_then(|s| s.allocation.as_mut()) {
        allocation.devices.results[0].admin_access = Some(true);
    }
    claims.push(looking);
    claims.push(claim(
        "other",
        &[("gpu", "other.example.com", "node-1", "gpu-1")],
    ));

    let view = capacity_view(DRIVER, &inventory, &claims);
    let partitioned = &view.nodes["node-0"];
    assert!(partitioned.has_shared_devices());
    assert_eq!(partitioned.parent_of("gpu-0-1g-3"), Some("gpu-0"));
    let used = partitioned.utilisation().total;
    assert!((used.equivalents - 1.0).abs() < 1e-9, "{used:?}");
    assert_eq!(used.capacity["memory"].allocated, q("70Gi"));

    let multi = &view.nodes["node-1"];
    let shares: Vec<_> = multi.shares_of("gpu-0").collect();
    assert_eq!(shares.len(), 2);
    assert_eq!(shares[0].claim.name, "claim-s1");
    assert_eq!(shares[1].hold.share_id.as_deref(), Some("share-2"));
    assert_eq!(multi.parent_of("gpu-0"), None);
    assert_eq!(
        multi.holds.len(),
        2,
        "admin access and other drivers hold nothing"
    );
    let used = multi.utilisation().total;
    assert_eq!(used.capacity["memory"].allocated, q("80Gi"));
    assert_eq!(used.capacity["memory"].total, q("160Gi"));
}
