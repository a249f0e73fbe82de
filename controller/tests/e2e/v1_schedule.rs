//! DRA `v1` end to end on a simulated 1.34 cluster: the kube-scheduler allocates from the
//! slices the node agents publish, by the `DeviceClasses` of the 1.34 overlay, claims made from
//! templates by the resourceclaim controller; the kubelet has the agent prepare the devices it
//! picked before the pod runs, and unprepare them when the pod goes. Covers a one-device
//! template, model classes, a `matchAttribute` NUMA constraint, a `firstAvailable` fallback, a
//! request nothing can satisfy and the overlay's example workload.

use std::collections::BTreeMap;
use std::time::Duration;

use dra_types::resource_v1::ResourceClaim;
use kube::api::DeleteParams;
use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::{DRIVER, WAIT};
use crate::v1_support::{gpus, h100s, ClusterV1, Gpu};

/// A claim spec with one request `gpu` for `count` devices of `class`.
fn exactly(class: &str, count: u32) -> Value {
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": class, "count": count}}]}})
}

/// A 1.34 cluster with the agents serving `nodes` and the overlay's device classes.
async fn start(dir: &std::path::Path, nodes: &[Vec<Gpu>]) -> ClusterV1 {
    let v1 = ClusterV1::start(dir, nodes, Duration::from_secs(60)).await;
    let classes = v1.overlay_device_classes().await;
    assert!(classes.contains(&format!("h100.{DRIVER}")), "{classes:?}");
    v1
}

/// Waits until pod `name` runs, and returns its node and the `(request, device)` results of
/// its claim, after checking that every result is ours and from the pool of that node.
async fn running(v1: &ClusterV1, name: &str) -> (String, Vec<(String, String)>) {
    eventually(&format!("pod {name} running"), WAIT, || async {
        v1.phase(name).await.as_deref() == Some("Running")
    })
    .await;
    let node = v1.node_of(name).await.expect("a running pod is bound");
    let claim = v1.claim_of(name).await;
    let results = allocation(&claim);
    for (driver, pool, _, _) in &results {
        assert_eq!(driver, DRIVER);
        assert_eq!(pool, &node, "devices from the pod's node");
    }
    let uid = claim.metadata.uid.clone().unwrap();
    let cdi = v1.agents.cdi_file(&node, &uid).unwrap();
    let spec = std::fs::read_to_string(&cdi).expect("the claim is prepared on the pod's node");
    let picked: Vec<(String, String)> = results
        .into_iter()
        .map(|(_, _, request, device)| (request, device))
        .collect();
    for (_, device) in &picked {
        assert!(spec.contains(device.as_str()), "{device} in {spec}");
    }
    (node, picked)
}

/// `(driver, pool, request, device)` of each result of the claim's allocation.
fn allocation(claim: &ResourceClaim) -> Vec<(String, String, String, String)> {
    let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
    let allocation = allocation.expect("the claim of a running pod is allocated");
    allocation
        .devices
        .results
        .iter()
        .map(|r| {
            (
                r.driver.clone(),
                r.pool.clone(),
                r.request.clone(),
                r.device.clone(),
            )
        })
        .collect()
}

/// The `numa` attribute of each device of `node`'s slice.
async fn numa_of(v1: &ClusterV1, node: &str) -> BTreeMap<String, String> {
    let slices = v1.slices().await;
    let slice = slices
        .iter()
        .find(|s| s.spec.node_name.as_deref() == Some(node))
        .unwrap();
    slice
        .spec
        .devices
        .iter()
        .map(|d| {
            let numa = serde_json::to_value(&d.attributes["numa"]).unwrap();
            (d.name.clone(), numa.to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_a_template_run_on_scheduler_picked_devices_and_release_them_when_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = [gpus("H100", 0, 2), gpus("H100", 0, 2)];
    let v1 = start(dir.path(), &nodes).await;
    v1.template("one-gpu", exactly(DRIVER, 1)).await;

    let mut taken = Vec::new();
    let mut device_a = None;
    for name in ["a", "b", "c", "d"] {
        v1.pod_from_template(name, "one-gpu").await;
    }
    for name in ["a", "b", "c", "d"] {
        let (node, picked) = running(&v1, name).await;
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].0, "gpu");
        if name == "a" {
            device_a = Some((node.clone(), picked[0].1.clone()));
        }
        taken.push((node, picked[0].1.clone()));
    }
    taken.sort();
    taken.dedup();
    assert_eq!(
        taken.len(),
        4,
        "four pods on four different devices: {taken:?}"
    );

    // A fifth pod waits for a device; deleting pod a unprepares and frees its device for it.
    v1.pod_from_template("e", "one-gpu").await;
    let claim_a = v1.claim_of("a").await;
    let uid_a = claim_a.metadata.uid.clone().unwrap();
    let node_a = v1.node_of("a").await.unwrap();
    let events = eventually("pod e waits for a device", WAIT, || async {
        let events = v1.events("e", "FailedScheduling").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_ne!(
        v1.phase("e").await.as_deref(),
        Some("Running"),
        "{events:?}"
    );
    v1.pods()
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("pod a and its claim gone, unprepared", WAIT, || async {
        let claim_gone = v1
            .claims()
            .get_opt(claim_a.metadata.name.as_deref().unwrap())
            .await
            .unwrap()
            .is_none();
        claim_gone && v1.phase("a").await.is_none()
    })
    .await;
    assert!(!v1.agents.cdi_file(&node_a, &uid_a).unwrap().exists());
    let (node_e, picked_e) = running(&v1, "e").await;
    assert_eq!(
        Some((node_e, picked_e[0].1.clone())),
        device_a,
        "pod e on the only device free, a's"
    );
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_classes_and_a_numa_constraint_pick_the_devices_they_describe() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = [gpus("A100", 0, 2), gpus("H100", 0, 4)];
    let v1 = start(dir.path(), &nodes).await;
    v1.template("h100", exactly(&format!("h100.{DRIVER}"), 1))
        .await;
    v1.template("a100", exactly(&format!("a100.{DRIVER}"), 1))
        .await;
    v1.template("l40s", exactly(&format!("l40s.{DRIVER}"), 1))
        .await;
    let mut pair = exactly(DRIVER, 2);
    pair["devices"]["constraints"] = json!([{"matchAttribute": format!("{DRIVER}/numa")}]);
    v1.template("pair", pair).await;

    v1.pod_from_template("h", "h100").await;
    v1.pod_from_template("a", "a100").await;
    assert_eq!(running(&v1, "h").await.0, "node-1");
    assert_eq!(running(&v1, "a").await.0, "node-0");

    // node-0 has one device left, so the pair can only come from one NUMA node of node-1.
    v1.pod_from_template("p", "pair").await;
    let (node, picked) = running(&v1, "p").await;
    assert_eq!(node, "node-1");
    assert_eq!(picked.len(), 2);
    let numa = numa_of(&v1, "node-1").await;
    assert_eq!(
        numa[&picked[0].1], numa[&picked[1].1],
        "{picked:?} on one NUMA node of {numa:?}"
    );

    // No node has an L40S: the pod waits, and the scheduler says why.
    v1.pod_from_template("l", "l40s").await;
    let events = eventually("pod l unschedulable", WAIT, || async {
        let events = v1.events("l", "FailedScheduling").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert!(v1.node_of("l").await.is_none(), "{events:?}");
    let claim = v1.claim_of("l").await;
    assert!(claim.status.and_then(|s| s.allocation).is_none());
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_available_takes_the_preferred_model_then_falls_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = gpus("H100", 0, 1);
    node.extend(gpus("A100", 1, 1));
    let v1 = start(dir.path(), &[node]).await;
    let spec = json!({"devices": {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "h100", "deviceClassName": format!("h100.{DRIVER}")},
        {"name": "any", "deviceClassName": DRIVER},
    ]}]}});
    v1.template("h100-or-any", spec).await;

    v1.pod_from_template("first", "h100-or-any").await;
    let (_, picked) = running(&v1, "first").await;
    assert_eq!(picked, [("gpu/h100".to_owned(), "gpu-0".to_owned())]);
    v1.pod_from_template("second", "h100-or-any").await;
    let (_, picked) = running(&v1, "second").await;
    assert_eq!(picked, [("gpu/any".to_owned(), "gpu-1".to_owned())]);
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overlay_example_runs_its_pod_on_two_h100s_of_one_numa_node() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = start(dir.path(), &[gpus("A100", 0, 4), h100s(4)]).await;
    let created = v1.apply_overlay_example("gpu-claim.yaml").await;
    let pod = created.iter().find(|(kind, _)| kind == "Pod").unwrap();
    let (node, picked) = running(&v1, &pod.1).await;
    assert_eq!(node, "node-1", "the H100s are on node-1");
    assert_eq!(picked.len(), 2, "{picked:?}");
    let numa = numa_of(&v1, &node).await;
    assert_eq!(
        numa[&picked[0].1], numa[&picked[1].1],
        "{picked:?} {numa:?}"
    );
    v1.shutdown().await;
}
