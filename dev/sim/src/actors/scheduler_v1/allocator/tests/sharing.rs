//! Shared devices in the allocator: partitions of an H100-like GPU drawing on one counter set
//! (`DRAPartitionableDevices`) are handed out while their counters fit, counting what is
//! allocated and what the same search picked; a device with `allowMultipleAllocations`
//! (`DRAConsumableCapacity`) is handed out while the rounded capacity fits, with a `shareID`
//! and `consumedCapacity` in the result; with the gates off neither is looked at.

use super::*;
use crate::actors::scheduler_v1::quantity::Quantity;

/// The counters of gpu-0: seven memory slices.
fn counter_set() -> Value {
    let counters: serde_json::Map<String, Value> = (0..7)
        .map(|i| (format!("memory-slice-{i}"), json!({"value": "1"})))
        .collect();
    json!({"name": "gpu-0-counters", "counters": counters})
}

/// A MIG-like partition of `size` memory slices at `start`.
fn partition(size: usize, start: usize) -> Value {
    let counters: serde_json::Map<String, Value> = (start..start + size)
        .map(|i| (format!("memory-slice-{i}"), json!({"value": "1"})))
        .collect();
    json!({"name": format!("gpu-0-mig-{size}g-{start}"),
        "attributes": {"profile": {"string": format!("{size}g")}},
        "consumesCounters": [{"counterSet": "gpu-0-counters", "counters": counters}]})
}

/// One pool of two slices, as 1.35+ lays it out: the counter set alone in one, the partitions
/// (seven 1g, three 2g, one 7g) in the other.
fn partitioned(partitionable: bool) -> Case {
    let mut devices: Vec<Value> = (0..7).map(|i| partition(1, i)).collect();
    devices.extend([0, 2, 4].map(|i| partition(2, i)));
    devices.push(partition(7, 0));
    let mut counters = slice("s-counters", "node-0", "node-0", 1, 2, Vec::new());
    Arc::make_mut(&mut counters).spec.shared_counters =
        serde_json::from_value(json!([counter_set()])).unwrap();
    let mut case = Case::new(vec![
        counters,
        slice("s-devices", "node-0", "node-0", 1, 2, devices),
    ]);
    case.sharing.partitionable = partitionable;
    case
}

fn profile(size: &str) -> Value {
    let selector = format!(r#"device.attributes["gpu.example.com"].profile == "{size}""#);
    one("gpu", exactly("any", &[selector.as_str()], None))
}

fn held(case: &mut Case, devices: &[&str]) {
    for device in devices {
        case.allocated
            .insert(DeviceId::new(DRIVER, "node-0", device));
    }
}

#[test]
fn seven_1g_partitions_go_to_seven_claims_and_an_eighth_waits() {
    let mut case = partitioned(true);
    let seven = case.devices(&vec![profile("1g"); 7]).unwrap();
    let mut names: Vec<String> = seven.into_iter().flatten().collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 7, "seven distinct partitions: {names:?}");
    assert_eq!(
        case.devices(&vec![profile("1g"); 8]),
        None,
        "eight in one search"
    );
    let all: Vec<String> = (0..7).map(|i| format!("gpu-0-mig-1g-{i}")).collect();
    held(
        &mut case,
        &all.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(case.devices(&[profile("1g")]), None, "an eighth later");
}

#[test]
fn a_whole_gpu_partition_is_refused_while_any_1g_is_held() {
    let mut case = partitioned(true);
    assert_eq!(
        case.devices(&[profile("7g")]),
        Some(vec![vec!["gpu=gpu-0-mig-7g-0".to_owned()]])
    );
    held(&mut case, &["gpu-0-mig-1g-6"]);
    assert_eq!(case.devices(&[profile("7g")]), None);
    assert_eq!(
        case.devices(&[profile("1g"), profile("7g")]),
        None,
        "nor with a 1g picked in the same search"
    );
}

#[test]
fn overlapping_partitions_are_skipped_until_none_fits() {
    let mut case = partitioned(true);
    held(&mut case, &["gpu-0-mig-1g-0"]);
    assert_eq!(
        case.devices(&[profile("2g")]),
        Some(vec![vec!["gpu=gpu-0-mig-2g-2".to_owned()]])
    );
    held(&mut case, &["gpu-0-mig-1g-3", "gpu-0-mig-1g-5"]);
    assert_eq!(case.devices(&[profile("2g")]), None, "every 2g overlaps");
}

#[test]
fn a_partition_consuming_more_than_its_counter_set_has_is_never_allocated() {
    let mut greedy = partition(1, 0);
    greedy["name"] = json!("greedy");
    greedy["consumesCounters"][0]["counters"]["memory-slice-0"] = json!({"value": "2"});
    let mut missing = partition(1, 1);
    missing["name"] = json!("missing");
    missing["consumesCounters"][0]["counterSet"] = json!("no-such-set");
    let mut s = slice("s-0", "node-0", "node-0", 1, 1, vec![greedy, missing]);
    Arc::make_mut(&mut s).spec.shared_counters =
        serde_json::from_value(json!([counter_set()])).unwrap();
    let mut case = Case::new(vec![s]);
    case.sharing.partitionable = true;
    assert_eq!(case.devices(&[profile("1g")]), None);
}

#[test]
fn with_the_partitionable_gate_off_counters_are_not_looked_at() {
    let mut case = partitioned(false);
    held(&mut case, &["gpu-0-mig-1g-0"]);
    assert_eq!(
        case.devices(&[profile("7g")]),
        Some(vec![vec!["gpu=gpu-0-mig-7g-0".to_owned()]])
    );
}

/// gpu-0 with 80Gi of memory shared in steps of 10Gi (default 10Gi) and a 100-share compute
/// capacity without policy; gpu-1 a whole 40Gi GPU.
fn shared(consumable: bool) -> Case {
    let mut gpu0 = gpu("gpu-0", "H100", 0, "80Gi");
    gpu0["allowMultipleAllocations"] = json!(true);
    gpu0["capacity"]["memory"]["requestPolicy"] =
        json!({"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}});
    gpu0["capacity"]["compute"] = json!({"value": "100"});
    let gpu1 = gpu("gpu-1", "A100", 0, "40Gi");
    let mut case = Case::new(vec![slice(
        "s-0",
        "node-0",
        "node-0",
        1,
        1,
        vec![gpu0, gpu1],
    )]);
    case.sharing.consumable = consumable;
    case
}

fn asking(requests: Value) -> Value {
    let mut exact = exactly(
        "gpu",
        &[r#"device.attributes["gpu.example.com"].model == "H100""#],
        None,
    );
    exact["capacity"] = json!({"requests": requests});
    one("gpu", exact)
}

fn consumed(result: &AllocationResult) -> Vec<(String, String)> {
    result.devices.results[0]
        .consumed_capacity
        .iter()
        .map(|(name, q)| (name.clone(), q.0.clone()))
        .collect()
}

fn pair(name: &str, amount: &str) -> (String, String) {
    (name.to_owned(), amount.to_owned())
}

#[test]
fn two_40gi_shares_fit_an_80gi_gpu_and_a_third_waits() {
    let mut case = shared(true);
    let half = asking(json!({"memory": "40Gi", "compute": "50"}));
    let two = case.run(&[half.clone(), half.clone()]).unwrap().unwrap();
    let ids: Vec<&str> = two
        .iter()
        .map(|r| r.devices.results[0].share_id.as_deref().unwrap())
        .collect();
    assert_ne!(ids[0], ids[1], "each share its own ID");
    assert!(ids.iter().all(|id| uuid::Uuid::parse_str(id).is_ok()));
    for result in &two {
        assert_eq!(result.devices.results[0].device, "gpu-0");
        assert_eq!(
            consumed(result),
            vec![pair("compute", "50"), pair("memory", "40Gi")]
        );
    }
    assert_eq!(
        case.run(&[half.clone(), half.clone(), half.clone()])
            .unwrap(),
        None
    );
    let stored = [
        ("memory".to_owned(), Quantity::parse("80Gi").unwrap()),
        ("compute".to_owned(), Quantity::parse("100").unwrap()),
    ];
    case.shares
        .insert(DeviceId::new(DRIVER, "node-0", "gpu-0"), stored.into());
    assert_eq!(case.run(&[half]).unwrap(), None, "a third after two stored");
}

#[test]
fn requests_round_up_to_the_policy_and_fill_in_what_they_do_not_name() {
    let case = shared(true);
    let run = |requests: Value| case.run(&[asking(requests)]).unwrap();
    let result = run(json!({"memory": "35Gi"})).unwrap();
    assert_eq!(
        consumed(&result[0]),
        vec![pair("compute", "100"), pair("memory", "40Gi")],
        "a step up; compute without policy or request takes it all"
    );
    let result = run(json!({"memory": "1Mi", "compute": "1"})).unwrap();
    assert_eq!(
        consumed(&result[0]),
        vec![pair("compute", "1"), pair("memory", "10Gi")],
        "below min: min"
    );
    let result = run(json!({})).unwrap();
    assert_eq!(
        consumed(&result[0])[1],
        pair("memory", "10Gi"),
        "the default"
    );
    assert_eq!(
        run(json!({"memory": "90Gi"})),
        None,
        "more than the GPU has"
    );
    assert_eq!(run(json!({"bandwidth": "1"})), None, "a capacity it lacks");
}

#[test]
fn a_device_allocated_whole_must_have_the_capacity_a_request_asks() {
    let case = shared(true);
    let ask = |memory: &str| {
        let mut exact = exactly(
            "gpu",
            &[r#"device.attributes["gpu.example.com"].model == "A100""#],
            None,
        );
        exact["capacity"] = json!({"requests": {"memory": memory}});
        case.run(&[one("gpu", exact)]).unwrap()
    };
    let whole = ask("40Gi").unwrap();
    assert_eq!(whole[0].devices.results[0].share_id, None);
    assert!(whole[0].devices.results[0].consumed_capacity.is_empty());
    assert_eq!(ask("41Gi"), None);
}

#[test]
fn with_the_consumable_gate_off_a_multi_allocation_device_is_taken_whole() {
    let case = shared(false);
    let plain = one(
        "gpu",
        exactly(
            "gpu",
            &[r#"device.attributes["gpu.example.com"].model == "H100""#],
            None,
        ),
    );
    let once = case.run(std::slice::from_ref(&plain)).unwrap().unwrap();
    assert_eq!(once[0].devices.results[0].share_id, None);
    assert_eq!(case.run(&[plain.clone(), plain]).unwrap(), None);
}

#[test]
fn a_distinct_attribute_constraint_spreads_shares_over_devices() {
    let shared_gpu = |name: &str| {
        let mut gpu = gpu(name, "H100", 0, "80Gi");
        gpu["allowMultipleAllocations"] = json!(true);
        gpu["attributes"]["uuid"] = json!({"string": format!("GPU-{name}")});
        gpu
    };
    let mut case = Case::new(vec![slice(
        "s-0",
        "node-0",
        "node-0",
        1,
        1,
        vec![shared_gpu("gpu-0"), shared_gpu("gpu-1")],
    )]);
    case.sharing.consumable = true;
    let mut exact = exactly("gpu", &[], Some(2));
    exact["capacity"] = json!({"requests": {"memory": "10Gi"}});
    let mut spec = one("gpu", exact);
    assert_eq!(
        case.devices(std::slice::from_ref(&spec)),
        Some(vec![vec!["gpu=gpu-0".to_owned(), "gpu=gpu-0".to_owned()]]),
        "two shares of the first device without a constraint"
    );
    spec["constraints"] = json!([{"distinctAttribute": "gpu.example.com/uuid"}]);
    assert_eq!(
        case.devices(std::slice::from_ref(&spec)),
        Some(vec![vec!["gpu=gpu-0".to_owned(), "gpu=gpu-1".to_owned()]])
    );
    spec["requests"][0]["exactly"]["count"] = json!(3);
    assert_eq!(
        case.devices(&[spec]),
        None,
        "two devices, three distinct values"
    );
}
