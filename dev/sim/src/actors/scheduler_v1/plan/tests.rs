//! Scheduling cycles over hand-made snapshots.

use super::*;
use crate::actors::claim_refs::fixtures;
use k8s_openapi::api::core::v1::NodeSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::json;

fn node(name: &str, unschedulable: bool) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: Some(unschedulable),
            ..NodeSpec::default()
        }),
        status: None,
    })
}

/// Pod `ns/p` whose pod claims each name the claim of the same name.
fn pod(claims: &[&str]) -> Pod {
    fixtures::pod(
        claims
            .iter()
            .map(|c| fixtures::entry(c, Some(c), None))
            .collect(),
    )
}

fn claim(name: &str, class: &str, allocation: Option<serde_json::Value>) -> Arc<ResourceClaim> {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid")},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}
    });
    if let Some(allocation) = allocation {
        value["status"] = json!({"allocation": allocation});
    }
    Arc::new(serde_json::from_value(value).unwrap())
}

fn on_node(node: &str) -> serde_json::Value {
    json!({"devices": {"results": []}, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}
    ]}]}})
}

fn slice(node: &str, devices: usize) -> Arc<ResourceSlice> {
    let devices: Vec<_> = (0..devices)
        .map(|i| json!({"name": format!("gpu-{i}")}))
        .collect();
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": node}, "spec": {
            "driver": "gpu.example.com", "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}}))
        .unwrap(),
    )
}

fn class(name: &str, expression: &str) -> Arc<DeviceClass> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}))
        .unwrap(),
    )
}

fn run(
    pod: &Pod,
    claims: &[Arc<ResourceClaim>],
    nodes: &[Arc<Node>],
    slices: &[Arc<ResourceSlice>],
    load: &[(&str, usize)],
) -> Decision {
    let classes = [
        class("gpu", "true"),
        class("broken", "device.attributes[\"x\"].y"),
    ];
    let claim = |name: &str| {
        claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .cloned()
    };
    let class = |name: &str| {
        classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .cloned()
    };
    let load = |node: &str| load.iter().find(|(n, _)| *n == node).map_or(0, |(_, l)| *l);
    let cel = CelEnv::new();
    decide(&Snapshot {
        pod,
        claim: &claim,
        in_flight: &|uid| uid == "flying-uid",
        nodes,
        slices,
        class: &class,
        allocated: &|_| false,
        shares: &|_| None,
        sharing: crate::actors::scheduler_v1::sharing::Sharing::default(),
        cel: &cel,
        load: &load,
        taints: None,
        extended: &PodExtended::None,
    })
}

fn message(decision: &Decision) -> &str {
    match decision {
        Decision::Wait { message, .. } => message,
        Decision::Gated(_) | Decision::Bind { .. } => panic!("not a failed cycle: {decision:?}"),
    }
}

#[test]
fn the_least_loaded_node_that_can_allocate_gets_the_pod() {
    let nodes = [
        node("node-0", false),
        node("node-1", false),
        node("node-2", false),
    ];
    let slices = [slice("node-0", 1), slice("node-1", 1)];
    let decision = run(
        &pod(&["c"]),
        &[claim("c", "gpu", None)],
        &nodes,
        &slices,
        &[("node-0", 3)],
    );
    let Decision::Bind { node, claims, .. } = decision else {
        panic!("{decision:?}");
    };
    assert_eq!(node, "node-1");
    assert_eq!(claims.len(), 1);
    let allocation = claims[0].allocation.as_ref().unwrap();
    assert_eq!(allocation.devices.results[0].pool, "node-1");
}

#[test]
fn an_allocated_claim_keeps_the_pod_on_its_node_and_is_only_reserved() {
    let nodes = [node("node-0", false), node("node-1", false)];
    let decision = run(
        &pod(&["c"]),
        &[claim("c", "gpu", Some(on_node("node-1")))],
        &nodes,
        &[],
        &[],
    );
    assert_eq!(
        decision,
        Decision::Bind {
            node: "node-1".into(),
            claims: vec![ClaimWrite {
                name: "c".into(),
                uid: "c-uid".into(),
                allocation: None
            }],
            extended: None,
        }
    );
}

#[test]
fn no_node_fitting_counts_the_reasons_of_every_node() {
    let nodes = [
        node("node-0", false),
        node("node-1", false),
        node("node-2", true),
    ];
    let slices = [slice("node-0", 0)];
    let decision = run(
        &pod(&["c"]),
        &[claim("c", "gpu", None)],
        &nodes,
        &slices,
        &[],
    );
    assert!(
        message(&decision).starts_with(
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 cannot allocate all claims. still not schedulable"
        ),
        "{decision:?}"
    );
}

#[test]
fn pre_enqueue_gates_a_pod_whose_claim_is_missing_or_being_deleted() {
    let nodes = [node("node-0", false)];
    assert_eq!(
        run(&pod(&["c"]), &[], &nodes, &[], &[]),
        Decision::Gated("resourceclaim.resource.k8s.io \"c\" not found".into())
    );
    let mut deleting = (*claim("c", "gpu", None)).clone();
    deleting.metadata.deletion_timestamp = Some(Time(chrono::Utc::now()));
    let deleting = Arc::new(deleting);
    assert_eq!(
        run(
            &pod(&["c"]),
            &[deleting],
            &nodes,
            &[slice("node-0", 1)],
            &[]
        ),
        Decision::Gated("resourceclaim \"c\" is being deleted".into())
    );
}

#[test]
fn pre_filter_refuses_missing_classes_and_claims_in_flight() {
    let nodes = [node("node-0", false)];
    let missing_class = run(&pod(&["c"]), &[claim("c", "nope", None)], &nodes, &[], &[]);
    assert!(message(&missing_class)
        .starts_with("0/1 nodes are available: request gpu: device class nope does not exist."));
    let flying = run(
        &pod(&["flying"]),
        &[claim("flying", "gpu", None)],
        &nodes,
        &[],
        &[],
    );
    assert!(message(&flying).starts_with(
        "0/1 nodes are available: resource claim ns/flying is in the process of being allocated."
    ));
}

#[test]
fn a_cel_error_aborts_the_cycle_as_a_scheduler_error() {
    let nodes = [node("node-0", false)];
    let decision = run(
        &pod(&["c"]),
        &[claim("c", "broken", None)],
        &nodes,
        &[slice("node-0", 1)],
        &[],
    );
    assert_eq!(
        decision,
        Decision::Wait {
            message: "running \"DynamicResources\" filter plugin: class broken: selector #0: CEL runtime error: no such key: y".into(),
            reason: explain::SCHEDULER_ERROR,
        }
    );
}
