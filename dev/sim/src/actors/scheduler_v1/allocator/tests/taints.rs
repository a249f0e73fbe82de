//! Device taints in the allocator (`DRADeviceTaints` on): a device with an untolerated
//! `NoSchedule` or `NoExecute` taint, its own or a `DeviceTaintRule`'s, is not handed out; a
//! tolerating request gets it and its result carries the request's tolerations; `None`
//! taints never block; with the gate off taints are not looked at.

use super::*;
use dra_types::resource_v1::DeviceTaintRule;

/// gpu-0 of node-0 with `taints`, and an untainted gpu-1.
fn tainted_gpu0(taints: Value) -> Case {
    let mut tainted = gpu("gpu-0", "H100", 0, "80Gi");
    tainted["taints"] = taints;
    Case::new(vec![slice(
        "s-0",
        "node-0",
        "node-0",
        1,
        1,
        vec![tainted, gpu("gpu-1", "H100", 0, "80Gi")],
    )])
}

fn with_rules(mut case: Case, rules: &[Value]) -> Case {
    let rules = rules
        .iter()
        .map(|r| Arc::new(serde_json::from_value::<DeviceTaintRule>(r.clone()).unwrap()))
        .collect();
    case.rules = Some(rules);
    case
}

fn taint(effect: &str) -> Value {
    json!([{"key": "example.com/unhealthy", "value": "true", "effect": effect,
        "timeAdded": "2026-01-01T00:00:00Z"}])
}

fn tolerating(count: i64, toleration: Value) -> Value {
    let mut exact = exactly("gpu", &[], Some(count));
    exact["tolerations"] = json!([toleration]);
    one("gpu", exact)
}

#[test]
fn a_device_with_an_untolerated_no_schedule_or_no_execute_taint_is_skipped() {
    for effect in ["NoSchedule", "NoExecute"] {
        let case = with_rules(tainted_gpu0(taint(effect)), &[]);
        assert_eq!(
            case.devices(&[one("gpu", exactly("gpu", &[], None))]),
            Some(vec![vec!["gpu=gpu-1".to_owned()]]),
            "{effect}"
        );
        assert_eq!(
            case.devices(&[one("gpu", exactly("gpu", &[], Some(2)))]),
            None,
            "{effect}"
        );
    }
}

#[test]
fn a_tolerating_request_gets_the_tainted_device_and_its_result_carries_the_tolerations() {
    let case = with_rules(tainted_gpu0(taint("NoSchedule")), &[]);
    let toleration = json!({"key": "example.com/unhealthy", "operator": "Exists"});
    let results = case
        .run(&[tolerating(2, toleration.clone())])
        .unwrap()
        .unwrap();
    let devices: Vec<&str> = results[0]
        .devices
        .results
        .iter()
        .map(|r| r.device.as_str())
        .collect();
    assert_eq!(devices, ["gpu-0", "gpu-1"]);
    for result in &results[0].devices.results {
        assert_eq!(
            serde_json::to_value(&result.tolerations).unwrap(),
            json!([toleration])
        );
    }
    let wrong_value = json!({"key": "example.com/unhealthy", "value": "false"});
    assert_eq!(case.devices(&[tolerating(2, wrong_value)]), None);
}

#[test]
fn a_none_taint_does_not_block_and_the_gate_off_ignores_every_taint() {
    let case = with_rules(tainted_gpu0(taint("None")), &[]);
    assert!(case
        .devices(&[one("gpu", exactly("gpu", &[], Some(2)))])
        .is_some());
    let gate_off = tainted_gpu0(taint("NoExecute"));
    assert!(gate_off
        .devices(&[one("gpu", exactly("gpu", &[], Some(2)))])
        .is_some());
}

#[test]
fn a_device_taint_rule_taints_the_devices_its_selector_matches() {
    let rule = |selector: Value, effect: &str| {
        json!({"metadata": {"name": "r"}, "spec": {"deviceSelector": selector,
            "taint": {"key": "example.com/cordoned", "effect": effect}}})
    };
    let untainted = || tainted_gpu0(json!([]));
    let one_gpu = || one("gpu", exactly("gpu", &[], None));
    let device_rule = with_rules(
        untainted(),
        &[rule(
            json!({"driver": DRIVER, "pool": "node-0", "device": "gpu-0"}),
            "NoSchedule",
        )],
    );
    assert_eq!(
        device_rule.devices(&[one_gpu()]),
        Some(vec![vec!["gpu=gpu-1".to_owned()]])
    );
    let pool_rule = with_rules(
        untainted(),
        &[rule(
            json!({"driver": DRIVER, "pool": "node-0"}),
            "NoExecute",
        )],
    );
    assert_eq!(pool_rule.devices(&[one_gpu()]), None);
    let other_pool = with_rules(
        untainted(),
        &[rule(json!({"pool": "node-1"}), "NoSchedule")],
    );
    assert_eq!(
        other_pool.devices(&[one_gpu()]),
        Some(vec![vec!["gpu=gpu-0".to_owned()]])
    );
    let informational = with_rules(untainted(), &[rule(json!({"driver": DRIVER}), "None")]);
    assert_eq!(
        informational.devices(&[one_gpu()]),
        Some(vec![vec!["gpu=gpu-0".to_owned()]])
    );
}

#[test]
fn all_mode_fails_on_a_node_with_a_tainted_matching_device() {
    let case = with_rules(tainted_gpu0(taint("NoSchedule")), &[]);
    let mut all = exactly("gpu", &[], None);
    all["allocationMode"] = json!("All");
    assert_eq!(case.devices(&[one("gpu", all.clone())]), None);
    all["tolerations"] = json!([{"operator": "Exists"}]);
    assert_eq!(
        case.devices(&[one("gpu", all)]),
        Some(vec![vec!["gpu=gpu-0".to_owned(), "gpu=gpu-1".to_owned()]])
    );
}
