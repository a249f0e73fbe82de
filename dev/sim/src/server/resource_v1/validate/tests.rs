// Builders take the JSON they embed by value, as `json!` hands it over.
#![allow(clippy::needless_pass_by_value)]

use serde_json::{json, Value};

use super::*;

fn fields(causes: &[FieldCause]) -> Vec<String> {
    causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

fn has(causes: &[FieldCause], field: &str, text: &str) -> bool {
    causes
        .iter()
        .any(|c| c.field == field && c.message.contains(text))
}

fn slice(devices: Value) -> Value {
    json!({"spec": {
        "driver": "gpu.dra-ledger.io",
        "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node-0",
        "devices": devices,
    }})
}

#[test]
fn a_valid_slice_passes() {
    let obj = slice(json!([{"name": "gpu-0", "attributes": {
        "model": {"string": "H100"}, "numa": {"int": 0},
        "gpu.dra-ledger.io/driverVersion": {"version": "1.2.3"}},
        "capacity": {"memory": {"value": "80Gi"}}}]));
    assert!(
        resource_slice(&obj).is_empty(),
        "{:?}",
        fields(&resource_slice(&obj))
    );
}

#[test]
fn slices_need_exactly_one_node_choice_and_a_positive_slice_count() {
    let mut obj = slice(json!([]));
    obj["spec"]["allNodes"] = json!(true);
    obj["spec"]["pool"]["resourceSliceCount"] = json!(0);
    let causes = resource_slice(&obj);
    assert!(
        has(&causes, "spec", "multiple fields are set"),
        "{:?}",
        fields(&causes)
    );
    assert!(has(
        &causes,
        "spec.pool.resourceSliceCount",
        "greater than zero"
    ));
    obj["spec"]["allNodes"] = json!(false);
    obj["spec"]["nodeName"] = Value::Null;
    assert!(has(&resource_slice(&obj), "spec", "exactly one of"));
}

#[test]
fn device_names_attributes_and_values_follow_the_v1_limits() {
    let long = "x".repeat(65);
    let obj = slice(json!([
        {"name": "GPU_0"},
        {"name": "gpu-1", "attributes": {
            "1bad": {"int": 1},
            "two": {"int": 1, "bool": true},
            "none": {},
            "long": {"string": long},
            "ver": {"version": "1.2"},
        }},
        {"name": "gpu-1"},
    ]));
    let causes = resource_slice(&obj);
    let f = fields(&causes);
    assert!(
        has(&causes, "spec.devices[0].name", "RFC 1123 label"),
        "{f:?}"
    );
    assert!(
        has(&causes, "spec.devices[1].attributes[1bad]", "C identifier"),
        "{f:?}"
    );
    assert!(
        has(
            &causes,
            "spec.devices[1].attributes[two]",
            "exactly one value"
        ),
        "{f:?}"
    );
    assert!(
        has(
            &causes,
            "spec.devices[1].attributes[none]",
            "exactly one value"
        ),
        "{f:?}"
    );
    assert!(
        has(&causes, "spec.devices[1].attributes[long].string", "64"),
        "{f:?}"
    );
    assert!(
        has(&causes, "spec.devices[1].attributes[ver].version", "semver"),
        "{f:?}"
    );
    assert!(has(&causes, "spec.devices[2].name", "Duplicate"), "{f:?}");
}

#[test]
fn more_than_128_devices_or_32_attributes_are_refused() {
    let many: Vec<Value> = (0..129).map(|i| json!({"name": format!("d{i}")})).collect();
    assert!(has(
        &resource_slice(&slice(Value::Array(many))),
        "spec.devices",
        "at most 128"
    ));
    let attributes: serde_json::Map<String, Value> = (0..33)
        .map(|i| (format!("a{i}"), json!({"int": i})))
        .collect();
    let obj = slice(json!([{"name": "d", "attributes": attributes}]));
    assert!(has(&resource_slice(&obj), "spec.devices[0]", "at most 32"));
}

#[test]
fn driver_pool_and_node_of_a_slice_are_immutable() {
    let old = slice(json!([]));
    let mut new = old.clone();
    new["spec"]["driver"] = json!("other.example.com");
    new["spec"]["pool"]["name"] = json!("p2");
    new["spec"]["pool"]["generation"] = json!(2);
    let f = fields(&resource_slice_update(&old, &new));
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(f.iter().any(|x| x.starts_with("spec.driver")));
    assert!(f.iter().any(|x| x.starts_with("spec.pool.name")));
}

fn claim(requests: Value) -> Value {
    json!({"devices": {"requests": requests}})
}

#[test]
fn requests_need_exactly_one_form_a_class_and_a_sensible_count() {
    let spec = claim(json!([
        {"name": "a"},
        {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 0}},
        {"name": "c", "exactly": {"deviceClassName": "", "allocationMode": "All", "count": 2}},
        {"name": "d", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some", "count": 1}},
        {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}},
    ]));
    let causes = claim_spec("spec", &spec);
    let f = fields(&causes);
    assert!(
        has(
            &causes,
            "spec.devices.requests[0]",
            "exactly one of `exactly` or `firstAvailable`"
        ),
        "{f:?}"
    );
    assert!(
        has(
            &causes,
            "spec.devices.requests[1].exactly.count",
            "greater than zero"
        ),
        "{f:?}"
    );
    assert!(
        has(
            &causes,
            "spec.devices.requests[2].exactly.deviceClassName",
            "Required"
        ),
        "{f:?}"
    );
    assert!(
        has(&causes, "spec.devices.requests[2].exactly.count", "'All'"),
        "{f:?}"
    );
    assert!(
        has(
            &causes,
            "spec.devices.requests[3].exactly.allocationMode",
            "Unsupported"
        ),
        "{f:?}"
    );
    assert!(
        has(&causes, "spec.devices.requests[4].name", "Duplicate"),
        "{f:?}"
    );
}

#[test]
fn constraints_and_configs_must_name_requests_or_subrequests() {
    let mut spec = claim(json!([
        {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}},
        {"name": "alt", "firstAvailable": [{"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]},
    ]));
    spec["devices"]["constraints"] = json!([
        {"requests": ["gpu", "alt/big"], "matchAttribute": "gpu.dra-ledger.io/numa"},
        {"requests": ["nope"], "matchAttribute": "numa"},
    ]);
    spec["devices"]["config"] = json!([
        {"requests": ["alt"], "opaque": {"driver": "gpu.dra-ledger.io", "parameters": {"kind": "DeviceConfig"}}},
        {"opaque": {"driver": "gpu.dra-ledger.io", "parameters": [1]}},
        {"requests": ["alt/small"]},
    ]);
    let causes = claim_spec("spec", &spec);
    let f = fields(&causes);
    assert!(
        has(
            &causes,
            "spec.devices.constraints[1].requests[0]",
            "must be the name of a request"
        ),
        "{f:?}"
    );
    assert!(
        has(
            &causes,
            "spec.devices.constraints[1].matchAttribute",
            "fully qualified"
        ),
        "{f:?}"
    );
    assert!(
        has(
            &causes,
            "spec.devices.config[1].opaque.parameters",
            "JSON object"
        ),
        "{f:?}"
    );
    assert!(
        has(
            &causes,
            "spec.devices.config[2].requests[0]",
            "must be the name of a request"
        ),
        "{f:?}"
    );
    assert!(
        has(&causes, "spec.devices.config[2].opaque", "Required"),
        "{f:?}"
    );
    assert_eq!(causes.len(), 5, "{f:?}");
}

fn allocated(reserved: Value) -> Value {
    json!({"metadata": {}, "status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.dra-ledger.io", "pool": "node-0", "device": "gpu-0"}]}},
        "reservedFor": reserved,
    }})
}

#[test]
fn reserved_for_needs_an_allocation_and_unique_complete_entries() {
    let pod = json!({"resource": "pods", "name": "p", "uid": "u1"});
    let mut claim = allocated(json!([pod, pod, {"resource": "pods", "name": "q"}]));
    let causes = claim_status(None, &claim);
    let f = fields(&causes);
    assert!(has(&causes, "status.reservedFor[1]", "Duplicate"), "{f:?}");
    assert!(
        has(&causes, "status.reservedFor[2].uid", "Required"),
        "{f:?}"
    );
    claim["status"]["allocation"] = Value::Null;
    assert!(has(
        &claim_status(None, &claim),
        "status.reservedFor",
        "`allocated` is not set"
    ));
}

#[test]
fn an_allocation_is_immutable_but_may_be_cleared() {
    let old = allocated(json!([]));
    let mut changed = old.clone();
    changed["status"]["allocation"]["devices"]["results"][0]["device"] = json!("gpu-1");
    assert!(has(
        &claim_status(Some(&old), &changed),
        "status.allocation",
        "immutable"
    ));
    let mut cleared = old.clone();
    cleared["status"]["allocation"] = Value::Null;
    assert!(claim_status(Some(&old), &cleared).is_empty());
}

#[test]
fn a_deleting_claim_takes_no_new_consumer_and_device_status_needs_an_allocated_device() {
    let old = allocated(json!([]));
    let mut new = allocated(json!([{"resource": "pods", "name": "p", "uid": "u1"}]));
    new["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(has(
        &claim_status(Some(&old), &new),
        "status.reservedFor",
        "deletionTimestamp"
    ));
    let mut status = allocated(json!([]));
    status["status"]["devices"] =
        json!([{"driver": "gpu.dra-ledger.io", "pool": "node-0", "device": "gpu-9"}]);
    assert!(has(
        &claim_status(None, &status),
        "status.devices[0]",
        "allocated device"
    ));
}

#[test]
fn device_classes_need_selector_expressions_and_object_parameters() {
    let class = json!({"spec": {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.dra-ledger.io'"}}, {"cel": {"expression": " "}}, {}],
        "config": [{"opaque": {"driver": "Bad_Driver!", "parameters": {}}}],
    }});
    let causes = device_class(&class);
    let f = fields(&causes);
    assert!(
        has(&causes, "spec.selectors[1].cel.expression", "Required"),
        "{f:?}"
    );
    assert!(has(&causes, "spec.selectors[2].cel", "Required"), "{f:?}");
    assert!(
        has(&causes, "spec.config[0].opaque.driver", "subdomain"),
        "{f:?}"
    );
    assert_eq!(causes.len(), 3, "{f:?}");
}

fn counter_map(n: usize) -> Value {
    (0..n)
        .map(|i| (format!("c{i}"), json!({"value": "1"})))
        .collect::<serde_json::Map<String, Value>>()
        .into()
}

#[test]
fn counter_sets_and_devices_go_in_separate_slices_within_the_1_36_limits() {
    let mut both = slice(json!([{"name": "d"}]));
    both["spec"]["sharedCounters"] = json!([{"name": "gpu-0", "counters": counter_map(1)}]);
    assert!(has(
        &resource_slice(&both),
        "spec",
        "only one of `sharedCounters` or `devices` is allowed"
    ));
    let mut counters_only = both.clone();
    counters_only["spec"]
        .as_object_mut()
        .unwrap()
        .remove("devices");
    assert_eq!(
        fields(&resource_slice(&counters_only)),
        Vec::<String>::new()
    );
    let sets: Vec<Value> = (0..9)
        .map(|i| json!({"name": format!("s{i}"), "counters": counter_map(1)}))
        .collect();
    counters_only["spec"]["sharedCounters"] = Value::Array(sets);
    assert!(has(
        &resource_slice(&counters_only),
        "spec.sharedCounters",
        "at most 8"
    ));
    counters_only["spec"]["sharedCounters"] = json!([{"name": "s", "counters": counter_map(33)}]);
    assert!(has(
        &resource_slice(&counters_only),
        "spec.sharedCounters[0].counters",
        "at most 32"
    ));
}

#[test]
fn devices_consuming_counters_are_at_most_64_a_slice_with_two_consumptions_each() {
    let consuming = |i: usize| {
        json!({"name": format!("d{i}"),
            "consumesCounters": [{"counterSet": "gpu-0", "counters": counter_map(1)}]})
    };
    let at_limit: Vec<Value> = (0..64).map(consuming).collect();
    assert_eq!(
        fields(&resource_slice(&slice(Value::Array(at_limit)))),
        Vec::<String>::new()
    );
    let over: Vec<Value> = (0..65).map(consuming).collect();
    assert!(has(
        &resource_slice(&slice(Value::Array(over))),
        "spec.devices",
        "at most 64"
    ));
    let plain: Vec<Value> = (0..65).map(|i| json!({"name": format!("d{i}")})).collect();
    assert_eq!(
        fields(&resource_slice(&slice(Value::Array(plain)))),
        Vec::<String>::new()
    );
    let three = json!([{"name": "d", "consumesCounters": [
        {"counterSet": "a", "counters": counter_map(1)},
        {"counterSet": "b", "counters": counter_map(1)},
        {"counterSet": "c", "counters": counter_map(1)}]}]);
    assert!(has(
        &resource_slice(&slice(three)),
        "spec.devices[0].consumesCounters",
        "at most 2"
    ));
}
