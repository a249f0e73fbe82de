//! The `nvml` source's sharing over a fake library: an H100 in MIG mode reporting its
//! GPU-instance profiles becomes a counter set and one partition per (profile, placement),
//! named and consuming as NVIDIA's DRA driver models them, laid out in valid slices; with
//! `--gpu-sharing capacity` a GPU without MIG is shared by memory and compute.

use dra_allocator::model::AttributeValue;
use dra_node::device::Discovered;
use dra_node::discovery::gpu_sharing::{profile_name, GpuSharing};
use dra_node::discovery::nvml::{discovered_from, GpuInfo, MigPlacement, MigProfile};
use dra_node::v1::pool::{pool_slices, Served, MAX_COUNTERS_PER_SET};
use dra_types::resource_v1::Counter;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::fake_sysfs::FakeSysfs;
use crate::nvml::{h100, FakeLibrary};

/// A profile queried as NVML constant `profile`, answered as profile `id`, placed at `starts`
/// over `size` memory slices each.
fn profile(profile: u32, id: u32, slices: u32, mib: u64, size: u32, starts: &[u32]) -> MigProfile {
    MigProfile {
        profile,
        id,
        slice_count: slices,
        memory_mib: mib,
        placements: starts
            .iter()
            .map(|&start| MigPlacement { start, size })
            .collect(),
    }
}

/// What NVML reports of an H100 80GB in MIG mode (`nvidia-smi mig -lgip`): 1g.10gb seven
/// times, 1g.10gb+me, 2g.20gb three times, 3g.40gb twice, 7g.80gb once.
fn h100_mig() -> GpuInfo {
    GpuInfo {
        mig_enabled: Some(true),
        mig_profiles: vec![
            profile(0, 19, 1, 9856, 1, &[0, 1, 2, 3, 4, 5, 6]),
            profile(7, 20, 1, 9856, 1, &[0, 1, 2, 3, 4, 5, 6]),
            profile(1, 14, 2, 20096, 2, &[0, 2, 4]),
            profile(2, 9, 3, 40320, 4, &[0, 4]),
            profile(4, 0, 7, 80896, 8, &[0]),
        ],
        ..h100("GPU-aaaa", "00000000:1B:00.0", 0)
    }
}

fn discovered(gpus: Vec<GpuInfo>, sharing: GpuSharing) -> Discovered {
    discovered_from(&FakeLibrary(gpus), &FakeSysfs::new().roots(), sharing).unwrap()
}

fn counter(value: &str) -> Counter {
    Counter {
        value: Quantity(value.to_owned()),
    }
}

#[test]
fn profile_names_are_spelt_as_nvidia_smi_spells_them() {
    let memory = 81_559 << 20;
    let gpu = h100_mig();
    let names: Vec<String> = gpu
        .mig_profiles
        .iter()
        .map(|p| profile_name(p, memory))
        .collect();
    assert_eq!(
        names,
        ["1g.10gb", "1g.10gb+me", "2g.20gb", "3g.40gb", "7g.80gb"]
    );
    let twice_the_memory = profile(9, 15, 1, 19968, 2, &[0]);
    assert_eq!(profile_name(&twice_the_memory, memory), "1g.20gb");
}

#[test]
fn a_mig_gpu_has_one_counter_set_of_memory_compute_and_memory_slices() {
    let found = discovered(vec![h100_mig()], GpuSharing::None);
    let set = &found.counter_sets["gpu-0-counter-set"];
    assert_eq!(set.counters.len(), 10);
    assert_eq!(
        set.counters["memory"],
        counter("79Gi"),
        "80896 MiB, the 7g profile's"
    );
    assert_eq!(set.counters["compute-slices"], counter("7"));
    for slice in 0..8 {
        assert_eq!(set.counters[&format!("memory-slice-{slice}")], counter("1"));
    }
    // the whole GPU stays, and consumes all of it
    let whole = &found.sharing["gpu-0"].consumes_counters;
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0].counters, set.counters);
}

#[test]
fn each_profile_placement_is_a_partition_named_and_consuming_as_nvidia_models_it() {
    let found = discovered(vec![h100_mig()], GpuSharing::None);
    let partitions: Vec<&str> = found
        .devices
        .keys()
        .filter(|name| name.contains("-mig-"))
        .map(String::as_str)
        .collect();
    // 7 + 7 + 3 + 2 + 1
    assert_eq!(partitions.len(), 20);
    assert!(partitions.contains(&"gpu-0-mig-1g10gb-19-6"));
    assert!(partitions.contains(&"gpu-0-mig-1g10gb-me-20-0"));
    assert!(partitions.contains(&"gpu-0-mig-3g40gb-9-4"));
    assert!(partitions.contains(&"gpu-0-mig-7g80gb-0-0"));

    let one = &found.devices["gpu-0-mig-1g10gb-19-3"];
    let a = &one.attributes;
    assert_eq!(a["type"], AttributeValue::String("mig".into()));
    assert_eq!(a["profile"], AttributeValue::String("1g.10gb".into()));
    assert_eq!(a["parentUUID"], AttributeValue::String("GPU-aaaa".into()));
    assert_eq!(a["parentIndex"], AttributeValue::Int(0));
    assert_eq!(
        a["productName"],
        AttributeValue::String("NVIDIA H100 80GB HBM3".into())
    );
    assert!(
        !a.contains_key("model"),
        "whole-GPU selectors on model keep off partitions"
    );
    assert_eq!(one.device_nodes, found.devices["gpu-0"].device_nodes);
    let used = &found.sharing["gpu-0-mig-1g10gb-19-3"].consumes_counters[0];
    assert_eq!(used.counter_set, "gpu-0-counter-set");
    let names: Vec<&str> = used.counters.keys().map(String::as_str).collect();
    assert_eq!(names, ["compute-slices", "memory", "memory-slice-3"]);
    assert_eq!(used.counters["memory"], counter("9856Mi"));

    let three = &found.sharing["gpu-0-mig-3g40gb-9-4"].consumes_counters[0].counters;
    for slice in 4..8 {
        assert!(three.contains_key(&format!("memory-slice-{slice}")));
    }
    assert_eq!(three["compute-slices"], counter("3"));
    let seven = &found.sharing["gpu-0-mig-7g80gb-0-0"].consumes_counters[0].counters;
    assert_eq!(seven.len(), 10, "the 7g takes every memory slice");
}

#[test]
fn the_counters_admit_seven_1g_partitions_and_no_7g_beside_one() {
    let found = discovered(vec![h100_mig()], GpuSharing::None);
    let consumes = |device: &str| found.sharing[device].consumes_counters[0].counters.clone();
    // the memory slices of the seven 1g.10gb placements are all different
    let mut slices: Vec<String> = (0..7)
        .flat_map(|p| consumes(&format!("gpu-0-mig-1g10gb-19-{p}")).into_keys())
        .filter(|k| k.starts_with("memory-slice-"))
        .collect();
    slices.sort();
    slices.dedup();
    assert_eq!(slices.len(), 7);
    // and the 7g shares memory slice 0 with the first of them
    assert!(consumes("gpu-0-mig-7g80gb-0-0").contains_key("memory-slice-0"));
    assert!(consumes("gpu-0-mig-1g10gb-19-0").contains_key("memory-slice-0"));
}

#[test]
fn eight_mig_gpus_lay_out_in_slices_within_the_api_limits() {
    let gpus: Vec<GpuInfo> = (0..8u32)
        .map(|i| GpuInfo {
            uuid: format!("GPU-{i}"),
            pci_bus_id: format!("00000000:{:02X}:00.0", 0x10 + i),
            minor: Some(i),
            ..h100_mig()
        })
        .collect();
    let found = discovered(gpus, GpuSharing::None);
    assert_eq!(found.devices.len(), 8 * 21);
    let slices = pool_slices("node-a", "gpu.example.com", 1, &found, Served::ALL).unwrap();
    let sets: Vec<usize> = slices
        .iter()
        .map(|s| s.spec.shared_counters.len())
        .collect();
    let devices: Vec<usize> = slices.iter().map(|s| s.spec.devices.len()).collect();
    assert_eq!(sets, [8, 0, 0, 0]);
    assert_eq!(devices, [0, 64, 64, 40]);
    for set in &slices[0].spec.shared_counters {
        assert!(set.counters.len() <= MAX_COUNTERS_PER_SET);
    }
}

#[test]
fn a_gpu_with_mig_off_has_no_partitions_even_where_nvml_lists_profiles() {
    let gpu = GpuInfo {
        mig_enabled: Some(false),
        ..h100_mig()
    };
    let found = discovered(vec![gpu], GpuSharing::None);
    assert_eq!(found.devices.keys().collect::<Vec<_>>(), ["gpu-0"]);
    assert!(found.counter_sets.is_empty());
    assert!(found.sharing.is_empty());
}

#[test]
fn capacity_sharing_offers_the_gpus_memory_in_gib_and_a_compute_share_of_100() {
    let found = discovered(
        vec![h100("GPU-aaaa", "00000000:1B:00.0", 0)],
        GpuSharing::Capacity,
    );
    let shared = &found.sharing["gpu-0"];
    assert!(shared.allow_multiple_allocations);
    let memory = &shared.capacity["memory"];
    assert_eq!(memory.value, Quantity("81559Mi".into()));
    let policy = memory.request_policy.as_ref().unwrap();
    assert_eq!(policy.default, Some(Quantity("79Gi".into())));
    let range = policy.valid_range.as_ref().unwrap();
    assert_eq!(range.min, Some(Quantity("1Gi".into())));
    assert_eq!(range.step, Some(Quantity("1Gi".into())));
    let compute = &shared.capacity["compute"];
    assert_eq!(compute.value, Quantity("100".into()));
    let policy = compute.request_policy.as_ref().unwrap();
    assert_eq!(policy.default, Some(Quantity("100".into())));
    assert_eq!(
        policy.valid_range.as_ref().unwrap().step,
        Some(Quantity("1".into()))
    );
    // and the slice says so
    let slices = pool_slices("n", "d", 1, &found, Served::ALL).unwrap();
    assert_eq!(
        slices[0].spec.devices[0].allow_multiple_allocations,
        Some(true)
    );
}

#[test]
fn without_capacity_sharing_a_gpu_is_whole_and_a_mig_gpu_keeps_its_partitions_with_it() {
    let plain = discovered(
        vec![h100("GPU-aaaa", "00000000:1B:00.0", 0)],
        GpuSharing::None,
    );
    assert!(plain.sharing.is_empty());
    let mig = discovered(vec![h100_mig()], GpuSharing::Capacity);
    assert!(!mig.sharing["gpu-0"].allow_multiple_allocations);
    assert_eq!(mig.counter_sets.len(), 1);
}
