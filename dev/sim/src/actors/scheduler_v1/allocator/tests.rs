//! The allocator on hand-made slices, classes and claims.

// The fixture builders take the JSON their callers write inline.
#![allow(clippy::needless_pass_by_value)]

use super::*;
use dra_types::resource_v1::DeviceRequestAllocationResult;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};

const DRIVER: &str = "gpu.example.com";

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("zone".to_owned(), "a".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

/// A device `name` with `model`, `numa` and `memory` (bare names of the driver).
fn gpu(name: &str, model: &str, numa: i64, memory: &str) -> Value {
    json!({"name": name,
        "attributes": {"model": {"string": model}, "numa": {"int": numa}},
        "capacity": {"memory": {"value": memory}}})
}

/// A slice of pool `pool` on `node` (or, with `node` empty, for all nodes).
fn slice(
    name: &str,
    node: &str,
    pool: &str,
    generation: i64,
    count: i64,
    devices: Vec<Value>,
) -> Arc<ResourceSlice> {
    let mut spec = json!({"driver": DRIVER,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": devices});
    if node.is_empty() {
        spec["allNodes"] = json!(true);
    } else {
        spec["nodeName"] = json!(node);
    }
    Arc::new(serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap())
}

fn class(name: &str, selectors: &[&str], config: Value) -> Arc<DeviceClass> {
    let selectors: Vec<Value> = selectors
        .iter()
        .map(|e| json!({"cel": {"expression": e}}))
        .collect();
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"selectors": selectors, "config": config}}))
        .unwrap(),
    )
}

fn classes() -> Vec<Arc<DeviceClass>> {
    vec![
        class(
            "gpu",
            &[r#"device.driver == "gpu.example.com""#],
            json!([{"opaque": {"driver": DRIVER, "parameters": {"from": "class"}}}]),
        ),
        class("any", &[], json!([])),
        class("broken", &["device.driver =="], json!([])),
    ]
}

fn claim(spec: &Value) -> DeviceClaim {
    serde_json::from_value(spec.clone()).unwrap()
}

struct Case {
    slices: Vec<Arc<ResourceSlice>>,
    allocated: HashSet<DeviceId>,
    /// What the stored shares of each device consume together.
    shares: HashMap<DeviceId, Amounts>,
    sharing: Sharing,
    cel: CelEnv,
    /// `Some` while `DRADeviceTaints` is on: the rules in force.
    rules: Option<Vec<Arc<dra_types::resource_v1::DeviceTaintRule>>>,
}

impl Case {
    fn new(slices: Vec<Arc<ResourceSlice>>) -> Self {
        Self {
            slices,
            allocated: HashSet::default(),
            shares: HashMap::default(),
            sharing: Sharing::default(),
            cel: CelEnv::new(),
            rules: None,
        }
    }

    fn run(&self, specs: &[Value]) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
        let classes = classes();
        let lookup = |name: &str| {
            classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
                .cloned()
        };
        let inventory = Inventory {
            slices: &self.slices,
            class: &lookup,
            allocated: &|id| self.allocated.contains(id),
            shares: &|id| self.shares.get(id).cloned(),
            sharing: self.sharing,
            cel: &self.cel,
            taints: self.rules.as_deref().map(|rules| TaintView { rules }),
        };
        let parsed: Vec<DeviceClaim> = specs.iter().map(claim).collect();
        let keys: Vec<String> = (0..specs.len()).map(|i| format!("ns/c{i}")).collect();
        let claims: Vec<ClaimToAllocate<'_>> = parsed
            .iter()
            .zip(&keys)
            .map(|(spec, key)| ClaimToAllocate { key, spec })
            .collect();
        allocate(&inventory, &node("node-0"), &claims)
    }

    /// `request=device` of each result of each claim.
    fn devices(&self, specs: &[Value]) -> Option<Vec<Vec<String>>> {
        let results = self.run(specs).unwrap()?;
        Some(
            results
                .iter()
                .map(|r| {
                    r.devices
                        .results
                        .iter()
                        .map(|d| format!("{}={}", d.request, d.device))
                        .collect()
                })
                .collect(),
        )
    }
}

fn exactly(class: &str, selectors: &[&str], count: Option<i64>) -> Value {
    let selectors: Vec<Value> = selectors
        .iter()
        .map(|e| json!({"cel": {"expression": e}}))
        .collect();
    let mut exact = json!({"deviceClassName": class, "selectors": selectors});
    if let Some(count) = count {
        exact["count"] = json!(count);
    }
    exact
}

fn one(name: &str, exact: Value) -> Value {
    json!({"requests": [{"name": name, "exactly": exact}]})
}

fn four_gpus() -> Case {
    Case::new(vec![
        slice(
            "s-0",
            "node-0",
            "node-0",
            1,
            1,
            vec![
                gpu("gpu-0", "A100", 0, "40Gi"),
                gpu("gpu-1", "H100", 1, "80Gi"),
                gpu("gpu-2", "H100", 0, "80Gi"),
                gpu("gpu-3", "A100", 1, "40Gi"),
            ],
        ),
        slice(
            "s-1",
            "node-1",
            "node-1",
            1,
            1,
            vec![gpu("gpu-9", "H100", 0, "80Gi")],
        ),
    ])
}

#[test]
fn one_device_of_the_class_comes_from_the_nodes_own_slice() {
    let case = four_gpus();
    let results = case
        .run(&[one("gpu", exactly("gpu", &[], None))])
        .unwrap()
        .unwrap();
    let result = &results[0];
    assert_eq!(
        result.devices.results,
        [DeviceRequestAllocationResult::new(
            "gpu", DRIVER, "node-0", "gpu-0"
        )]
    );
    let selector = serde_json::to_value(result.node_selector.as_ref().unwrap()).unwrap();
    assert_eq!(
        selector,
        json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-0"]}
        ]}]})
    );
}

#[test]
fn request_selectors_pick_by_model_and_by_capacity() {
    let case = four_gpus();
    let by_model = exactly(
        "gpu",
        &[r#"device.attributes["gpu.example.com"].model == "H100""#],
        None,
    );
    assert_eq!(
        case.devices(&[one("gpu", by_model)]),
        Some(vec![vec!["gpu=gpu-1".into()]])
    );
    let by_memory = exactly(
        "gpu",
        &[r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0"#],
        Some(2),
    );
    assert_eq!(
        case.devices(&[one("gpu", by_memory)]),
        Some(vec![vec!["gpu=gpu-1".into(), "gpu=gpu-2".into()]])
    );
    let too_big = exactly(
        "gpu",
        &[r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("80Gi"))"#],
        None,
    );
    assert_eq!(case.devices(&[one("gpu", too_big)]), None);
}

#[test]
fn match_attribute_backtracks_until_the_devices_share_a_numa_node() {
    let case = four_gpus();
    let spec = json!({
        "requests": [
            {"name": "a", "exactly": exactly("gpu", &[], None)},
            {"name": "b", "exactly": exactly("gpu", &[r#"device.attributes["gpu.example.com"].model == "H100""#], None)}
        ],
        "constraints": [{"matchAttribute": "gpu.example.com/numa"}]
    });
    // a=gpu-0 (numa 0) forces b onto gpu-2, the H100 on numa 0.
    assert_eq!(
        case.devices(&[spec]),
        Some(vec![vec!["a=gpu-0".into(), "b=gpu-2".into()]])
    );
    let scoped = json!({
        "requests": [
            {"name": "a", "exactly": exactly("gpu", &[], Some(2))},
            {"name": "b", "exactly": exactly("gpu", &[], None)}
        ],
        "constraints": [{"requests": ["a"], "matchAttribute": "gpu.example.com/numa"}]
    });
    assert_eq!(
        case.devices(&[scoped]),
        Some(vec![vec![
            "a=gpu-0".into(),
            "a=gpu-2".into(),
            "b=gpu-1".into()
        ]])
    );
}

#[test]
fn devices_without_the_constrained_attribute_never_match() {
    let case = four_gpus();
    let spec = json!({
        "requests": [{"name": "a", "exactly": exactly("gpu", &[], None)}],
        "constraints": [{"matchAttribute": "gpu.example.com/pcieRoot"}]
    });
    assert_eq!(case.devices(&[spec]), None);
    let other_domain = json!({
        "requests": [{"name": "a", "exactly": exactly("gpu", &[], None)}],
        "constraints": [{"matchAttribute": "other.example.com/numa"}]
    });
    assert_eq!(
        case.devices(&[other_domain]),
        None,
        "bare names belong to the driver's domain only"
    );
}

#[test]
fn all_mode_takes_every_matching_device_and_needs_at_least_one() {
    let case = four_gpus();
    let mut all = exactly(
        "gpu",
        &[r#"device.attributes["gpu.example.com"].model == "A100""#],
        None,
    );
    all["allocationMode"] = json!("All");
    assert_eq!(
        case.devices(&[one("gpu", all.clone())]),
        Some(vec![vec!["gpu=gpu-0".into(), "gpu=gpu-3".into()]])
    );
    let mut busy = four_gpus();
    busy.allocated
        .insert(DeviceId::new(DRIVER, "node-0", "gpu-3"));
    assert_eq!(
        busy.devices(&[one("gpu", all)]),
        None,
        "one of them is in use"
    );
    let mut none = exactly(
        "gpu",
        &[r#"device.attributes["gpu.example.com"].model == "B200""#],
        None,
    );
    none["allocationMode"] = json!("All");
    assert_eq!(case.devices(&[one("gpu", none)]), None);
}

#[test]
fn first_available_falls_back_to_the_next_subrequest() {
    let case = four_gpus();
    let spec = json!({"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "count": 5},
        {"name": "b200", "deviceClassName": "gpu", "selectors": [{"cel": {"expression": r#"device.attributes["gpu.example.com"].model == "B200""#}}]},
        {"name": "h100", "deviceClassName": "gpu", "selectors": [{"cel": {"expression": r#"device.attributes["gpu.example.com"].model == "H100""#}}]}
    ]}]});
    let results = case.run(&[spec]).unwrap().unwrap();
    assert_eq!(results[0].devices.results[0].request, "gpu/h100");
    assert_eq!(results[0].devices.results[0].device, "gpu-1");
    assert_eq!(results[0].devices.config[0].requests, ["gpu/h100"]);
}

#[test]
fn allocated_devices_and_those_of_earlier_claims_are_not_handed_out_twice() {
    let mut case = four_gpus();
    case.allocated
        .insert(DeviceId::new(DRIVER, "node-0", "gpu-0"));
    case.allocated
        .insert(DeviceId::new(DRIVER, "node-0", "gpu-1"));
    let request = one("gpu", exactly("gpu", &[], None));
    assert_eq!(
        case.devices(&[request.clone(), request.clone()]),
        Some(vec![vec!["gpu=gpu-2".into()], vec!["gpu=gpu-3".into()]])
    );
    assert_eq!(
        case.devices(&[request.clone(), request.clone(), request]),
        None
    );
}

#[test]
fn only_the_newest_complete_generation_of_a_pool_counts() {
    let case = Case::new(vec![
        slice(
            "old",
            "node-0",
            "p",
            1,
            1,
            vec![gpu("gpu-old", "H100", 0, "80Gi")],
        ),
        slice(
            "new",
            "node-0",
            "p",
            2,
            1,
            vec![gpu("gpu-new", "H100", 0, "80Gi")],
        ),
        slice(
            "half",
            "node-0",
            "q",
            1,
            2,
            vec![gpu("gpu-half", "H100", 0, "80Gi")],
        ),
    ]);
    let request = one("gpu", exactly("gpu", &[], None));
    assert_eq!(
        case.devices(std::slice::from_ref(&request)),
        Some(vec![vec!["gpu=gpu-new".into()]])
    );
    assert_eq!(
        case.devices(&[request.clone(), request]),
        None,
        "pool q is incomplete"
    );
    let mut all = exactly("gpu", &[], None);
    all["allocationMode"] = json!("All");
    assert_eq!(
        case.run(&[one("gpu", all)]).unwrap_err().to_string(),
        "claim ns/c0, request gpu: asks for all devices, but resource pool gpu.example.com/q is currently being updated"
    );
}

#[test]
fn a_slice_for_all_nodes_needs_no_node_selector() {
    let case = Case::new(vec![slice(
        "shared",
        "",
        "shared",
        1,
        1,
        vec![gpu("gpu-0", "H100", 0, "80Gi")],
    )]);
    let results = case
        .run(&[one("gpu", exactly("gpu", &[], None))])
        .unwrap()
        .unwrap();
    assert_eq!(results[0].devices.results[0].device, "gpu-0");
    assert_eq!(results[0].node_selector, None);
}

#[test]
fn cel_errors_name_the_class_or_claim_and_the_selector() {
    let case = four_gpus();
    let missing = exactly(
        "gpu",
        &[
            "true",
            r#"device.attributes["gpu.example.com"].missing == 1"#,
        ],
        None,
    );
    assert_eq!(
        case.run(&[one("gpu", missing)]).unwrap_err().to_string(),
        "claim ns/c0: selector #1: CEL runtime error: no such key: missing"
    );
    let error = case
        .run(&[one("gpu", exactly("broken", &[], None))])
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("class broken: selector #0: CEL compile error: compilation failed"),
        "{error}"
    );
    let not_bool = exactly("any", &["device.driver"], None);
    assert_eq!(
        case.run(&[one("gpu", not_bool)]).unwrap_err().to_string(),
        "claim ns/c0: selector #0: CEL runtime error: CEL result of type string could not be converted to bool"
    );
}

#[test]
fn class_and_claim_config_are_copied_for_their_requests() {
    let case = four_gpus();
    let spec = json!({
        "requests": [
            {"name": "a", "exactly": exactly("gpu", &[], None)},
            {"name": "b", "exactly": exactly("gpu", &[], None)},
            {"name": "c", "exactly": exactly("any", &[], None)}
        ],
        "config": [
            {"opaque": {"driver": DRIVER, "parameters": {"for": "all"}}},
            {"requests": ["a", "c"], "opaque": {"driver": DRIVER, "parameters": {"for": "a+c"}}}
        ]
    });
    let results = case.run(&[spec]).unwrap().unwrap();
    let config = serde_json::to_value(&results[0].devices.config).unwrap();
    let params = |p: Value| json!({"driver": DRIVER, "parameters": p});
    assert_eq!(
        config,
        json!([
            {"source": "FromClass", "requests": ["a", "b"], "opaque": params(json!({"from": "class"}))},
            {"source": "FromClaim", "opaque": params(json!({"for": "all"}))},
            {"source": "FromClaim", "requests": ["a", "c"], "opaque": params(json!({"for": "a+c"}))},
            {"source": "FromClaim", "requests": ["a", "c"], "opaque": params(json!({"for": "a+c"}))}
        ])
    );
}

#[test]
fn a_claim_asking_for_more_than_32_devices_is_an_error() {
    let case = four_gpus();
    assert_eq!(
        case.run(&[one("gpu", exactly("gpu", &[], Some(33)))])
            .unwrap_err()
            .to_string(),
        "claim ns/c0: number of requested devices 33 exceeds the claim limit of 32"
    );
}

#[test]
fn a_pool_that_lists_a_device_twice_is_invalid_and_one_missing_a_slice_incomplete() {
    let node = node("node-0");
    let pool = |slices: &[Arc<ResourceSlice>]| {
        let pools = pools::gather(slices, &node);
        assert_eq!(pools.len(), 1);
        (pools[0].invalid, pools[0].incomplete)
    };
    // Slice `name` of the two of pool `p` on node-0, with one A100 named `device`.
    let half = |name: &str, device: &str| {
        let devices = vec![gpu(device, "A100", 0, "40Gi")];
        slice(name, "node-0", "p", 1, 2, devices)
    };
    let distinct = [half("s1", "gpu-0"), half("s2", "gpu-1")];
    assert_eq!(pool(&distinct), (false, false));
    assert_eq!(
        pool(&[half("s1", "gpu-0"), half("s2", "gpu-0")]),
        (true, false)
    );
    assert_eq!(pool(&distinct[..1]), (false, true));
}

mod sharing;
mod taints;
