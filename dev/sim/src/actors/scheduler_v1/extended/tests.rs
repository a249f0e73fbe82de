//! The claim made for a pod's extended resources, and a cycle that allocates it.

// The fixture builders take the JSON their callers write inline.
#![allow(clippy::needless_pass_by_value)]

use super::*;
use crate::actors::scheduler_v1::cel_env::CelEnv;
use crate::actors::scheduler_v1::plan::{decide, Decision, Snapshot};
use dra_types::resource_v1::{ResourceClaim, ResourceSlice};

fn class(name: &str, extended: Option<&str>) -> Arc<DeviceClass> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": "true"}}],
                "extendedResourceName": extended}}))
        .unwrap(),
    )
}

fn pod(containers: Value, init: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "p-uid"},
        "spec": {"containers": containers, "initContainers": init}}))
    .unwrap()
}

fn asks(name: &str, requests: Value) -> Value {
    json!({"name": name, "resources": {"requests": requests}})
}

fn classes() -> Vec<Arc<DeviceClass>> {
    vec![
        class("gpu.example.com", Some("example.com/gpu")),
        class("nic.example.com", None),
    ]
}

fn claim_of(pod: &Pod) -> ExtendedClaim {
    match plan(pod, &classes(), true) {
        PodExtended::Claim(claim) => claim,
        other => panic!("{other:?}"),
    }
}

fn summary(claim: &ExtendedClaim) -> Vec<String> {
    claim
        .spec
        .requests
        .iter()
        .map(|r| {
            let e = r.exactly.as_ref().unwrap();
            format!("{}={}x{}", r.name, e.count.unwrap(), e.device_class_name)
        })
        .collect()
}

fn mapped(claim: &ExtendedClaim) -> Vec<String> {
    claim
        .mappings
        .iter()
        .map(|m| format!("{}:{}->{}", m.container, m.resource, m.request))
        .collect()
}

#[test]
fn explicit_and_implicit_names_map_to_their_classes_one_request_per_container_and_resource() {
    let pod = pod(
        json!([
            asks("a", json!({"cpu": "1", "example.com/gpu": "2"})),
            asks(
                "b",
                json!({"deviceclass.resource.kubernetes.io/nic.example.com": "1",
                "example.com/gpu": "1"})
            ),
        ]),
        json!([]),
    );
    let claim = claim_of(&pod);
    assert_eq!(
        summary(&claim),
        [
            "container-0-request-1=2xgpu.example.com",
            "container-1-request-0=1xnic.example.com",
            "container-1-request-1=1xgpu.example.com",
        ]
    );
    assert_eq!(
        mapped(&claim),
        [
            "b:deviceclass.resource.kubernetes.io/nic.example.com->container-1-request-0",
            "a:example.com/gpu->container-0-request-1",
            "b:example.com/gpu->container-1-request-1",
        ]
    );
}

#[test]
fn an_init_container_reuses_the_devices_of_the_containers_after_it() {
    let pod = pod(
        json!([asks("main", json!({"example.com/gpu": "2"}))]),
        json!([
            asks("setup", json!({"example.com/gpu": "1"})),
            asks("big", json!({"example.com/gpu": "3"})),
        ]),
    );
    let claim = claim_of(&pod);
    // `setup` fits in what `main` gets; `big` needs one more, in a request of its own.
    assert_eq!(
        summary(&claim),
        [
            "container-1-request-0=1xgpu.example.com",
            "container-2-request-0=2xgpu.example.com"
        ]
    );
    assert_eq!(
        mapped(&claim),
        [
            "main:example.com/gpu->container-2-request-0",
            "setup:example.com/gpu->container-2-request-0",
            "big:example.com/gpu->container-2-request-0",
            "big:example.com/gpu->container-1-request-0",
        ]
    );
}

#[test]
fn an_unmapped_name_or_the_gate_off_leaves_no_node_and_plain_resources_ask_nothing() {
    let unmapped = pod(
        json!([asks(
            "a",
            json!({"example.com/fpga": "1", "example.com/gpu": "1"})
        )]),
        json!([]),
    );
    assert_eq!(
        plan(&unmapped, &classes(), true),
        PodExtended::Unmapped(vec!["example.com/fpga".to_owned()])
    );
    let mapped = pod(
        json!([asks("a", json!({"example.com/gpu": "1"}))]),
        json!([]),
    );
    assert_eq!(
        plan(&mapped, &classes(), false),
        PodExtended::Unmapped(vec!["example.com/gpu".to_owned()])
    );
    let plain = pod(
        json!([asks(
            "a",
            json!({"cpu": "2", "memory": "1Gi", "example.com/gpu": "0",
            "hugepages-2Mi": "2Mi", "kubernetes.io/x": "1"})
        )]),
        json!([]),
    );
    assert_eq!(plan(&plain, &classes(), true), PodExtended::None);
    assert!(is_dra_name("deviceclass.resource.kubernetes.io/gpu"));
    assert!(!is_dra_name("requests.example.com/gpu"));
}

#[test]
fn the_newest_class_naming_a_resource_maps_it() {
    let mut old = (*class("old", Some("example.com/gpu"))).clone();
    old.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    let mut new = (*class("new", Some("example.com/gpu"))).clone();
    new.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-02-01T00:00:00Z".parse().unwrap(),
    ));
    let classes = [Arc::new(new), Arc::new(old)];
    let found = class_for("example.com/gpu", &classes).unwrap();
    assert_eq!(found.metadata.name.as_deref(), Some("new"));
    assert!(class_for("deviceclass.resource.kubernetes.io/old", &classes).is_some());
    assert!(class_for("deviceclass.resource.kubernetes.io/none", &classes).is_none());
}

fn node(name: &str, unschedulable: bool) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"unschedulable": unschedulable}}))
        .unwrap(),
    )
}

#[test]
fn the_unmapped_message_is_the_fit_error_of_missing_resources() {
    let nodes = [node("node-0", false), node("node-1", false)];
    let names = ["example.com/gpu".to_owned()];
    assert_eq!(
        unmapped_failure(&nodes, &names, false),
        "0/2 nodes are available: 2 Insufficient example.com/gpu. preemption: 0/2 nodes are \
         available: 2 No preemption victims found for incoming pod."
    );
    let nodes = [node("node-0", false), node("node-1", true)];
    assert_eq!(
        unmapped_failure(&nodes, &names, true),
        "0/2 nodes are available: 1 Insufficient example.com/gpu, 1 node(s) were \
         unschedulable. still not schedulable, preemption: 0/2 nodes are available: 1 No \
         preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_cycle_allocates_the_extended_claim_on_a_node_with_the_devices() {
    let slice: Arc<ResourceSlice> = Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "node-1"}, "spec": {
            "driver": "gpu.example.com", "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}))
        .unwrap(),
    );
    let pod = pod(
        json!([asks("a", json!({"example.com/gpu": "2"}))]),
        json!([]),
    );
    let classes = classes();
    let extended = plan(&pod, &classes, true);
    let nodes = [node("node-0", false), node("node-1", false)];
    let cel = CelEnv::new();
    let class = |name: &str| {
        classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .cloned()
    };
    let decision = decide(&Snapshot {
        pod: &pod,
        claim: &|_| None::<Arc<ResourceClaim>>,
        in_flight: &|_| false,
        nodes: &nodes,
        slices: &[slice],
        class: &class,
        allocated: &|_| false,
        shares: &|_| None,
        sharing: crate::actors::scheduler_v1::sharing::Sharing::default(),
        cel: &cel,
        load: &|_| 0,
        taints: None,
        extended: &extended,
    });
    let Decision::Bind {
        node,
        claims,
        extended: Some((claim, allocation)),
    } = decision
    else {
        panic!("{decision:?}");
    };
    assert_eq!(node, "node-1");
    assert!(claims.is_empty());
    assert_eq!(summary(&claim), ["container-0-request-0=2xgpu.example.com"]);
    let devices: Vec<_> = allocation
        .devices
        .results
        .iter()
        .map(|r| format!("{}={}", r.request, r.device))
        .collect();
    assert_eq!(
        devices,
        ["container-0-request-0=gpu-0", "container-0-request-0=gpu-1"]
    );
    let object = claim_object(&pod, &claim);
    assert_eq!(object["metadata"]["generateName"], "p-extended-resources-");
    assert_eq!(object["metadata"]["annotations"][CLAIM_ANNOTATION], "true");
    assert_eq!(
        object["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "p-uid",
            "controller": true}])
    );
    assert_eq!(
        status_patch("p-extended-resources-x", &claim.mappings),
        json!({"status": {"extendedResourceClaimStatus": {
            "requestMappings": [{"containerName": "a", "resourceName": "example.com/gpu",
                "requestName": "container-0-request-0"}],
            "resourceClaimName": "p-extended-resources-x"}}})
    );
}
