use std::collections::BTreeMap;

use dra_types::resource_v1::{
    CapacityRequestPolicy, Counter, DeviceCapacity, DeviceCounterConsumption, DeviceTaint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;
use crate::device::NodeDevice;

fn counters(pairs: &[(&str, &str)]) -> BTreeMap<String, Counter> {
    pairs
        .iter()
        .map(|(k, v)| {
            let value = Quantity((*v).to_owned());
            ((*k).to_owned(), Counter { value })
        })
        .collect()
}

fn set(name: &str) -> CounterSet {
    CounterSet {
        name: name.to_owned(),
        counters: counters(&[("memory", "80Gi"), ("compute", "7")]),
    }
}

/// `gpus` GPUs, each as `partitions` partitions (`gpu-G-part-P`) consuming its counter set
/// (`gpu-G`).
pub(crate) fn partitioned(gpus: usize, partitions: usize) -> Discovered {
    let mut found = Discovered::default();
    for g in 0..gpus {
        let name = format!("gpu-{g}");
        found.counter_sets.insert(name.clone(), set(&name));
        for p in 0..partitions {
            let device = format!("gpu-{g}-part-{p}");
            found.devices.insert(
                device.clone(),
                NodeDevice {
                    name: device.clone(),
                    ..NodeDevice::default()
                },
            );
            let sharing = DeviceSharing {
                capacity: BTreeMap::from([(
                    "memory".to_owned(),
                    DeviceCapacity::new(Quantity("10Gi".into())),
                )]),
                consumes_counters: vec![DeviceCounterConsumption {
                    counter_set: name.clone(),
                    counters: counters(&[("memory", "10Gi"), ("compute", "1")]),
                }],
                ..DeviceSharing::default()
            };
            found.sharing.insert(device, sharing);
        }
    }
    found
}

fn whole(name: &str) -> NodeDevice {
    NodeDevice {
        name: name.to_owned(),
        ..NodeDevice::default()
    }
}

#[test]
fn counter_sets_go_in_a_slice_of_their_own_and_every_slice_counts_the_pool() {
    let slices = pool_slices(
        "node-a",
        "gpu.example.com",
        3,
        &partitioned(1, 8),
        Served::ALL,
    )
    .unwrap();
    assert_eq!(slices.len(), 2);
    assert_eq!(slices[0].spec.shared_counters, vec![set("gpu-0")]);
    assert!(slices[0].spec.devices.is_empty());
    assert!(slices[1].spec.shared_counters.is_empty());
    assert_eq!(slices[1].spec.devices.len(), 8);
    for slice in &slices {
        assert_eq!(slice.spec.pool.name, "node-a");
        assert_eq!(slice.spec.pool.generation, 3);
        assert_eq!(slice.spec.pool.resource_slice_count, 2);
        assert_eq!(slice.spec.node_name.as_deref(), Some("node-a"));
    }
    let device = &slices[1].spec.devices[0];
    assert_eq!(device.consumes_counters[0].counter_set, "gpu-0");
    assert_eq!(device.capacity["memory"].value, Quantity("10Gi".into()));
}

#[test]
fn more_than_eight_counter_sets_and_sixty_four_partitions_split_into_more_slices() {
    // 9 GPUs of 8 partitions: 2 counter-set slices (8 + 1), 72 devices in 2 slices (64 + 8)
    let slices = pool_slices("n", "d", 1, &partitioned(9, 8), Served::ALL).unwrap();
    let sets: Vec<usize> = slices
        .iter()
        .map(|s| s.spec.shared_counters.len())
        .collect();
    let devices: Vec<usize> = slices.iter().map(|s| s.spec.devices.len()).collect();
    assert_eq!(sets, vec![8, 1, 0, 0]);
    assert_eq!(devices, vec![0, 0, 64, 8]);
    assert!(slices.iter().all(|s| s.spec.pool.resource_slice_count == 4));
}

#[test]
fn whole_devices_without_counters_fill_slices_up_to_the_plain_limit() {
    let mut found = Discovered::default();
    for i in 0..100 {
        let name = format!("gpu-{i}");
        found.devices.insert(name.clone(), whole(&name));
    }
    let slices = pool_slices("n", "d", 1, &found, Served::ALL).unwrap();
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0].spec.devices.len(), 100);
}

#[test]
fn an_empty_pool_is_one_empty_slice() {
    let slices = pool_slices("n", "d", 1, &Discovered::default(), Served::ALL).unwrap();
    assert_eq!(slices.len(), 1);
    assert!(slices[0].spec.devices.is_empty());
    assert_eq!(slices[0].spec.pool.resource_slice_count, 1);
}

#[test]
fn without_the_sharing_fields_served_only_whole_devices_are_published() {
    let mut found = partitioned(1, 8);
    found.devices.insert("gpu-1".into(), whole("gpu-1"));
    let mut policy = DeviceCapacity::new(Quantity("80Gi".into()));
    policy.request_policy = Some(CapacityRequestPolicy::default());
    found.sharing.insert(
        "gpu-1".into(),
        DeviceSharing {
            capacity: BTreeMap::from([("memory".to_owned(), policy)]),
            allow_multiple_allocations: true,
            ..DeviceSharing::default()
        },
    );
    let slices = pool_slices("n", "d", 1, &found, Served::NONE).unwrap();
    assert_eq!(slices.len(), 1);
    let spec = &slices[0].spec;
    assert!(spec.shared_counters.is_empty());
    assert_eq!(spec.devices.len(), 1);
    let gpu = &spec.devices[0];
    assert_eq!(gpu.name, "gpu-1");
    assert_eq!(gpu.allow_multiple_allocations, None);
    assert_eq!(gpu.capacity["memory"].request_policy, None);
    assert_eq!(gpu.capacity["memory"].value, Quantity("80Gi".into()));
    let served = pool_slices("n", "d", 1, &found, Served::ALL).unwrap();
    let gpu = served
        .iter()
        .flat_map(|s| &s.spec.devices)
        .find(|d| d.name == "gpu-1")
        .unwrap();
    assert_eq!(gpu.allow_multiple_allocations, Some(true));
    assert!(gpu.capacity["memory"].request_policy.is_some());
}

#[test]
fn a_counter_set_over_the_counter_limit_is_refused() {
    let mut found = Discovered::default();
    let many: Vec<(String, String)> = (0..33).map(|i| (format!("c{i}"), "1".to_owned())).collect();
    let pairs: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    found.counter_sets.insert(
        "big".into(),
        CounterSet {
            name: "big".into(),
            counters: counters(&pairs),
        },
    );
    let error = pool_slices("n", "d", 1, &found, Served::ALL).unwrap_err();
    assert_eq!(
        error.to_string(),
        "counter set big: 33 counters, at most 32 allowed"
    );
}

#[test]
fn a_tainted_device_lowers_the_devices_per_slice_to_sixty_four() {
    let mut found = Discovered::default();
    for i in 0..100 {
        let name = format!("gpu-{i:03}");
        found.devices.insert(name.clone(), whole(&name));
    }
    let mut content = pool_content(&found, Served::ALL).unwrap();
    content.devices[7].taints.push(DeviceTaint {
        key: "d/unhealthy".into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    });
    let slices = content.into_slices("n", "d", 1);
    let devices: Vec<usize> = slices.iter().map(|s| s.spec.devices.len()).collect();
    assert_eq!(devices, vec![64, 36]);
    assert!(slices.iter().all(|s| s.spec.pool.resource_slice_count == 2));
}

#[test]
fn capacity_served_without_partitions_keeps_shared_gpus_and_leaves_partitions_out() {
    let mut found = partitioned(1, 2);
    found.devices.insert("gpu-9".into(), whole("gpu-9"));
    found.sharing.insert(
        "gpu-9".into(),
        DeviceSharing {
            allow_multiple_allocations: true,
            ..DeviceSharing::default()
        },
    );
    let served = Served {
        partitions: false,
        capacity: true,
    };
    let slices = pool_slices("n", "d", 1, &found, served).unwrap();
    assert_eq!(slices.len(), 1);
    let names: Vec<&str> = slices[0]
        .spec
        .devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["gpu-9"]);
    assert_eq!(
        slices[0].spec.devices[0].allow_multiple_allocations,
        Some(true)
    );
}

#[test]
fn kept_fields_tells_which_sharing_fields_a_server_dropped() {
    let mut found = partitioned(1, 1);
    let mut policy = DeviceCapacity::new(Quantity("80Gi".into()));
    policy.request_policy = Some(CapacityRequestPolicy::default());
    found.devices.insert("gpu-9".into(), whole("gpu-9"));
    found.sharing.insert(
        "gpu-9".into(),
        DeviceSharing {
            capacity: BTreeMap::from([("memory".to_owned(), policy)]),
            allow_multiple_allocations: true,
            ..DeviceSharing::default()
        },
    );
    let sent = pool_slices("n", "d", 1, &found, Served::ALL).unwrap();
    assert!(sent.iter().all(uses_sharing));
    for slice in &sent {
        assert_eq!(kept_fields(slice, slice), Served::ALL);
    }
    // what a 1.35 server answers: the gated fields dropped
    let dropped: Vec<ResourceSlice> = sent
        .iter()
        .map(|slice| {
            let mut back = slice.clone();
            back.spec.shared_counters.clear();
            for device in &mut back.spec.devices {
                device.consumes_counters.clear();
                device.allow_multiple_allocations = None;
                for capacity in device.capacity.values_mut() {
                    capacity.request_policy = None;
                }
            }
            back
        })
        .collect();
    assert_eq!(
        kept_fields(&sent[0], &dropped[0]),
        Served {
            partitions: false,
            capacity: true
        },
        "the counter-set slice says nothing of capacity"
    );
    assert_eq!(kept_fields(&sent[1], &dropped[1]), Served::NONE);
    let plain = pool_slices("n", "d", 1, &found, Served::NONE).unwrap();
    assert!(!plain.iter().any(uses_sharing));
}
