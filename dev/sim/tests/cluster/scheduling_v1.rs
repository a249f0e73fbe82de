//! The 1.34 scheduler of a `KubernetesVersion::V1_34` cluster (the first test plays 1.37 too):
//! pods with claims are scheduled by allocating devices from the `ResourceSlices` (published
//! here by the test, as a driver would) with CEL selectors, counts, `All`, `firstAvailable` and
//! `matchAttribute`; the claims get the delete-protection finalizer, `status.allocation` with
//! the node selector and `reservedFor`; the pod is bound with a `Scheduled` event, or stays
//! Pending with `FailedScheduling`.

// The fixture builders take the JSON their callers write inline.
#![allow(clippy::needless_pass_by_value)]

use std::time::Duration;

use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use dra_sim::KubernetesVersion;
use dra_types::resource_v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice, DELETE_PROTECTION_FINALIZER,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use testkit::eventually;

use crate::support::list;

pub(crate) const DRIVER: &str = "gpu.dra-ledger.io";
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// A two-node 1.34 cluster without simulated slices, with class `gpu` (driver selector and a
/// config entry).
async fn cluster() -> (ClusterHandle, Client) {
    cluster_at(KubernetesVersion::V1_34).await
}

/// [`cluster`] playing `version`.
pub(crate) async fn cluster_at(version: KubernetesVersion) -> (ClusterHandle, Client) {
    cluster_with(ClusterConfig {
        nodes: 2,
        kubernetes_version: version,
        ..ClusterConfig::default()
    })
    .await
}

/// The cluster of `config`, with class `gpu` (driver selector and a config entry).
pub(crate) async fn cluster_with(config: ClusterConfig) -> (ClusterHandle, Client) {
    let cluster = start_cluster(config).await.expect("cluster starts");
    let client = cluster.kube_client();
    create(
        &client,
        ApiResource::erase::<DeviceClass>(&()),
        json!({"metadata": {"name": "gpu"}, "spec": {
            "selectors": [{"cel": {"expression": format!("device.driver == {DRIVER:?}")}}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": {"sharing": "none"}}}]
        }}),
    )
    .await;
    (cluster, client)
}

pub(crate) async fn create(client: &Client, resource: ApiResource, object: Value) {
    let namespaced = resource.kind != "DeviceClass" && resource.kind != "ResourceSlice";
    let api: Api<DynamicObject> = if namespaced {
        Api::default_namespaced_with(client.clone(), &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let mut object = object;
    object["apiVersion"] = json!(resource.api_version);
    object["kind"] = json!(resource.kind);
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A device with `model`, `numa` and `memory`.
pub(crate) fn gpu(name: &str, model: &str, numa: i64, memory: &str) -> Value {
    json!({"name": name,
        "attributes": {"model": {"string": model}, "numa": {"int": numa}},
        "capacity": {"memory": {"value": memory}}})
}

/// Publishes the node's slice (one pool named after the node).
pub(crate) async fn publish(client: &Client, node: &str, devices: Vec<Value>) {
    create(
        client,
        ApiResource::erase::<ResourceSlice>(&()),
        json!({"metadata": {"name": format!("{node}-gpu")}, "spec": {
            "driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}}),
    )
    .await;
}

/// Creates a claim `name` with `devices` as its `spec.devices`.
pub(crate) async fn create_claim(client: &Client, name: &str, devices: Value) {
    create(
        client,
        ApiResource::erase::<ResourceClaim>(&()),
        json!({"metadata": {"name": name}, "spec": {"devices": devices}}),
    )
    .await;
}

/// Creates a pod `name` whose pod claim `gpu` has `source` (a claim or template name).
pub(crate) async fn create_pod(client: &Client, name: &str, source: Value) {
    let mut entry = json!({"name": "gpu"});
    entry
        .as_object_mut()
        .unwrap()
        .extend(source.as_object().unwrap().clone());
    create(
        client,
        ApiResource::erase::<Pod>(&()),
        json!({"metadata": {"name": name}, "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [entry]}}),
    )
    .await;
}

pub(crate) fn claim_ref(claim: &str) -> Value {
    json!({"resourceClaimName": claim})
}

pub(crate) fn exactly(selectors: &[&str], extra: Value) -> Value {
    let selectors: Vec<Value> = selectors
        .iter()
        .map(|e| json!({"cel": {"expression": e}}))
        .collect();
    let mut exact = json!({"deviceClassName": "gpu", "selectors": selectors});
    exact
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    exact
}

pub(crate) fn one_request(exact: Value) -> Value {
    json!({"requests": [{"name": "gpu", "exactly": exact}]})
}

pub(crate) async fn pod_node(client: &Client, name: &str) -> Option<String> {
    Api::<Pod>::default_namespaced(client.clone())
        .get(name)
        .await
        .unwrap()
        .spec?
        .node_name
}

/// Waits until the pod is bound; its node.
pub(crate) async fn bound(client: &Client, name: &str) -> String {
    eventually(format!("pod {name} is bound"), PATIENCE, || async {
        pod_node(client, name).await
    })
    .await
}

pub(crate) async fn claim(client: &Client, name: &str) -> ResourceClaim {
    Api::<ResourceClaim>::default_namespaced(client.clone())
        .get(name)
        .await
        .unwrap()
}

/// `request=device` of every result of the claim.
pub(crate) async fn devices(client: &Client, name: &str) -> Vec<String> {
    let allocation = claim(client, name).await.allocation().cloned().unwrap();
    allocation
        .devices
        .results
        .iter()
        .map(|r| format!("{}={}", r.request, r.device))
        .collect()
}

/// The notes of the scheduler's events with `reason` about pod `name`.
pub(crate) async fn events(client: &Client, name: &str, reason: &str) -> Vec<String> {
    list(Api::<Event>::default_namespaced(client.clone()))
        .await
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}

/// Waits for a `FailedScheduling` event about the pod that starts with `prefix`.
pub(crate) async fn failed_scheduling(client: &Client, name: &str, prefix: &str) -> String {
    eventually(
        format!("FailedScheduling for {name}: {prefix}"),
        PATIENCE,
        || async {
            events(client, name, "FailedScheduling")
                .await
                .into_iter()
                .find(|note| note.starts_with(prefix))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_claim_gets_a_device_of_its_class_and_the_pod_is_bound_with_an_event() {
    for version in [KubernetesVersion::V1_34, KubernetesVersion::V1_37] {
        template_claim_is_allocated_and_bound(version).await;
    }
}

async fn template_claim_is_allocated_and_bound(version: KubernetesVersion) {
    let (cluster, client) = cluster_at(version).await;
    publish(&client, "node-1", vec![gpu("gpu-0", "H100", 0, "80Gi")]).await;
    let template = ResourceClaimTemplate::new(
        "gpu-template",
        None,
        serde_json::from_value(json!({"devices": one_request(exactly(&[], json!({})))})).unwrap(),
    );
    Api::<ResourceClaimTemplate>::default_namespaced(client.clone())
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
    create_pod(
        &client,
        "worker",
        json!({"resourceClaimTemplateName": "gpu-template"}),
    )
    .await;
    assert_eq!(bound(&client, "worker").await, "node-1");
    let pod = Api::<Pod>::default_namespaced(client.clone())
        .get("worker")
        .await
        .unwrap();
    let claim_name = pod.status.unwrap().resource_claim_statuses.unwrap()[0]
        .resource_claim_name
        .clone()
        .unwrap();
    let allocated = claim(&client, &claim_name).await;
    assert!(
        allocated.has_delete_protection(),
        "{:?}",
        allocated.metadata.finalizers
    );
    assert_eq!(
        allocated.metadata.finalizers.as_deref(),
        Some(&[DELETE_PROTECTION_FINALIZER.to_owned()][..])
    );
    let allocation = serde_json::to_value(allocated.allocation().unwrap()).unwrap();
    assert_eq!(
        allocation["devices"]["results"],
        json!([{"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": "gpu-0"}])
    );
    assert_eq!(
        allocation["devices"]["config"],
        json!([{"source": "FromClass", "requests": ["gpu"],
            "opaque": {"driver": DRIVER, "parameters": {"sharing": "none"}}}])
    );
    assert_eq!(
        allocation["nodeSelector"],
        json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
        ]}]})
    );
    let reserved: Vec<(&str, &str, &str)> = allocated
        .reserved_for()
        .iter()
        .map(|r| (r.resource.as_str(), r.name.as_str(), r.uid.as_str()))
        .collect();
    assert_eq!(
        reserved,
        [("pods", "worker", pod.metadata.uid.as_deref().unwrap())]
    );
    let scheduled = eventually("a Scheduled event", PATIENCE, || async {
        let notes = events(&client, "worker", "Scheduled").await;
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert_eq!(
        scheduled,
        ["Successfully assigned default/worker to node-1"]
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_selectors_pick_devices_by_model_and_by_capacity() {
    let (cluster, client) = cluster().await;
    publish(
        &client,
        "node-0",
        vec![
            gpu("gpu-0", "A100", 0, "40Gi"),
            gpu("gpu-1", "A100", 0, "20Gi"),
        ],
    )
    .await;
    publish(
        &client,
        "node-1",
        vec![
            gpu("gpu-0", "A100", 0, "20Gi"),
            gpu("gpu-1", "H100", 1, "80Gi"),
        ],
    )
    .await;
    let by_model = exactly(
        &[r#"device.attributes["gpu.dra-ledger.io"].model == "H100""#],
        json!({}),
    );
    create_claim(&client, "h100", one_request(by_model)).await;
    let by_memory = exactly(
        &[r#"device.capacity["gpu.dra-ledger.io"].memory.compareTo(quantity("40Gi")) >= 0"#],
        json!({}),
    );
    create_claim(&client, "big", one_request(by_memory)).await;
    create_pod(&client, "model", claim_ref("h100")).await;
    assert_eq!(bound(&client, "model").await, "node-1");
    assert_eq!(devices(&client, "h100").await, ["gpu=gpu-1"]);
    create_pod(&client, "memory", claim_ref("big")).await;
    assert_eq!(bound(&client, "memory").await, "node-0");
    assert_eq!(devices(&client, "big").await, ["gpu=gpu-0"]);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_match_attribute_and_first_available_shape_the_allocation() {
    let (cluster, client) = cluster().await;
    publish(
        &client,
        "node-0",
        vec![
            gpu("gpu-0", "A100", 0, "40Gi"),
            gpu("gpu-1", "A100", 1, "40Gi"),
            gpu("gpu-2", "A100", 1, "40Gi"),
            gpu("gpu-3", "H100", 0, "80Gi"),
            gpu("gpu-4", "H100", 1, "80Gi"),
        ],
    )
    .await;
    // node-1 is cordoned so that every pod must use node-0.
    let cordon = json!({"spec": {"unschedulable": true}});
    Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .patch("node-1", &PatchParams::default(), &Patch::Merge(&cordon))
        .await
        .unwrap();
    let model = |m: &str| format!(r#"device.attributes["gpu.dra-ledger.io"].model == "{m}""#);

    // All: every H100 of the node.
    create_claim(
        &client,
        "every",
        one_request(exactly(&[&model("H100")], json!({"allocationMode": "All"}))),
    )
    .await;
    create_pod(&client, "every", claim_ref("every")).await;
    assert_eq!(bound(&client, "every").await, "node-0");
    assert_eq!(devices(&client, "every").await, ["gpu=gpu-3", "gpu=gpu-4"]);

    // Two A100s on one NUMA node: gpu-0 (numa 0) has no partner, so gpu-1 and gpu-2.
    create_claim(
        &client,
        "pair",
        json!({"requests": [{"name": "gpu", "exactly": exactly(&[&model("A100")], json!({"count": 2}))}],
            "constraints": [{"matchAttribute": "gpu.dra-ledger.io/numa"}]}),
    )
    .await;
    create_pod(&client, "pair", claim_ref("pair")).await;
    bound(&client, "pair").await;
    assert_eq!(devices(&client, "pair").await, ["gpu=gpu-1", "gpu=gpu-2"]);

    // No B200 exists and the H100s are taken: firstAvailable falls back to the A100 left.
    let sub = |name: &str, m: &str| json!({"name": name, "deviceClassName": "gpu", "selectors": [{"cel": {"expression": model(m)}}]});
    create_claim(
        &client,
        "fallback",
        json!({"requests": [{"name": "gpu", "firstAvailable": [
            sub("b200", "B200"), sub("h100", "H100"), sub("a100", "A100")
        ]}]}),
    )
    .await;
    create_pod(&client, "fallback", claim_ref("fallback")).await;
    bound(&client, "fallback").await;
    assert_eq!(devices(&client, "fallback").await, ["gpu/a100=gpu-0"]);

    // Another All over the A100s cannot be satisfied: they are all in use.
    create_claim(
        &client,
        "none-left",
        one_request(exactly(&[&model("A100")], json!({"allocationMode": "All"}))),
    )
    .await;
    create_pod(&client, "none-left", claim_ref("none-left")).await;
    failed_scheduling(
        &client,
        "none-left",
        "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) were unschedulable.",
    )
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_that_cannot_be_allocated_stay_pending_with_a_failed_scheduling_event() {
    let (cluster, client) = cluster().await;
    publish(&client, "node-0", vec![gpu("gpu-0", "A100", 0, "40Gi")]).await;
    create_claim(
        &client,
        "three",
        one_request(exactly(&[], json!({"count": 3}))),
    )
    .await;
    create_pod(&client, "three", claim_ref("three")).await;
    let text = failed_scheduling(
        &client,
        "three",
        "0/2 nodes are available: 2 cannot allocate all claims.",
    )
    .await;
    assert_eq!(
        text,
        "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );

    let missing_class =
        json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "missing"}}]});
    create_claim(&client, "orphan", missing_class).await;
    create_pod(&client, "orphan", claim_ref("orphan")).await;
    failed_scheduling(
        &client,
        "orphan",
        "0/2 nodes are available: request gpu: device class missing does not exist.",
    )
    .await;

    let broken = r#"device.attributes["gpu.dra-ledger.io"].vendor == "x""#;
    create_claim(
        &client,
        "broken",
        one_request(exactly(&[broken], json!({}))),
    )
    .await;
    create_pod(&client, "broken", claim_ref("broken")).await;
    failed_scheduling(
        &client,
        "broken",
        "running \"DynamicResources\" filter plugin: claim default/broken: selector #0: CEL runtime error: no such key: vendor",
    )
    .await;

    // Still pending, the claims unallocated, and no text posted twice.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for name in ["three", "orphan", "broken"] {
        assert_eq!(pod_node(&client, name).await, None, "{name}");
        assert!(!claim(&client, name).await.is_allocated(), "{name}");
        let notes = events(&client, name, "FailedScheduling").await;
        let distinct: std::collections::BTreeSet<&String> = notes.iter().collect();
        assert_eq!(
            distinct.len(),
            notes.len(),
            "{name}: a text posted twice: {notes:?}"
        );
    }
    let pod = Api::<Pod>::default_namespaced(client.clone())
        .get("broken")
        .await
        .unwrap();
    let condition = pod.status.unwrap().conditions.unwrap();
    let scheduled = condition
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(
        (scheduled.status.as_str(), scheduled.reason.as_deref()),
        ("False", Some("SchedulerError"))
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_competing_for_the_last_device_get_it_once() {
    let (cluster, client) = cluster().await;
    publish(&client, "node-0", vec![gpu("gpu-0", "A100", 0, "40Gi")]).await;
    for name in ["first", "second"] {
        create_claim(&client, name, one_request(exactly(&[], json!({})))).await;
    }
    // Both pods arrive at once; the scheduler has several workers.
    tokio::join!(
        create_pod(&client, "first", claim_ref("first")),
        create_pod(&client, "second", claim_ref("second"))
    );
    let winner = eventually("one pod is bound", PATIENCE, || async {
        for name in ["first", "second"] {
            if pod_node(&client, name).await.is_some() {
                return Some(name);
            }
        }
        None
    })
    .await;
    let loser = if winner == "first" { "second" } else { "first" };
    failed_scheduling(
        &client,
        loser,
        "0/2 nodes are available: 2 cannot allocate all claims.",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(pod_node(&client, loser).await, None);
    assert!(!claim(&client, loser).await.is_allocated());
    assert_eq!(devices(&client, winner).await, ["gpu=gpu-0"]);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_claim_is_allocated_to_a_node_lands_on_that_node() {
    let (cluster, client) = cluster().await;
    publish(&client, "node-0", vec![gpu("gpu-0", "A100", 0, "40Gi")]).await;
    create_claim(&client, "placed", one_request(exactly(&[], json!({})))).await;
    let allocation = json!({"status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": "gpu-7"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
        ]}]}
    }}});
    Api::<ResourceClaim>::default_namespaced(client.clone())
        .patch_status(
            "placed",
            &PatchParams::default(),
            &Patch::Merge(&allocation),
        )
        .await
        .unwrap();
    create_pod(&client, "follower", claim_ref("placed")).await;
    assert_eq!(bound(&client, "follower").await, "node-1");
    let placed = claim(&client, "placed").await;
    assert_eq!(placed.reserved_for().len(), 1);
    assert_eq!(placed.reserved_for()[0].name, "follower");
    assert_eq!(
        devices(&client, "placed").await,
        ["gpu=gpu-7"],
        "the allocation is kept"
    );
    // A second pod sharing the claim is appended to reservedFor on the same node.
    create_pod(&client, "sharer", claim_ref("placed")).await;
    assert_eq!(bound(&client, "sharer").await, "node-1");
    let names: Vec<String> = claim(&client, "placed")
        .await
        .reserved_for()
        .iter()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(names, ["follower", "sharer"]);
    cluster.shutdown().await;
}
