//! Device taints in a simulated 1.37 cluster (where `DRADeviceTaints` and the rules are on and
//! `DeviceTaintRule` is served in `resource.k8s.io/v1`): the scheduler keeps pods off devices
//! with untolerated `NoSchedule`/`NoExecute` taints (of the slice or of a rule) and says so in
//! upstream's words, `None` taints do not count; the eviction controller deletes pods whose
//! devices get an untolerated `NoExecute` taint (event, `DisruptionTarget` condition), after
//! `tolerationSeconds` where tolerated for a while, cancels when the taint goes, and reports
//! on the rule's status. The kubelets are off, so an evicted pod keeps its deletion timestamp
//! and its condition can be read.

// The fixture builders take the JSON their callers write inline.
#![allow(clippy::needless_pass_by_value)]

use std::time::{Duration, Instant};

use dra_sim::actors::ActorsConfig;
use dra_sim::cluster::{ClusterConfig, ClusterHandle};
use dra_sim::KubernetesVersion;
use dra_types::resource_v1::{DeviceTaintRule, ResourceSlice};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use testkit::eventually;

use crate::scheduling_v1::{
    bound, claim, claim_ref, cluster_with, create_claim, create_pod, events, exactly,
    failed_scheduling, gpu, one_request, publish, DRIVER, PATIENCE,
};

/// A two-node 1.37 cluster without kubelets or slices, with class `gpu`.
pub(crate) async fn cluster() -> (ClusterHandle, Client) {
    cluster_with(ClusterConfig {
        nodes: 2,
        kubernetes_version: KubernetesVersion::V1_37,
        actors: ActorsConfig {
            kubelets: false,
            rule_status_period: Duration::from_millis(200),
            ..ActorsConfig::default()
        },
        ..ClusterConfig::default()
    })
    .await
}

fn tainted(name: &str, effect: &str) -> Value {
    let mut device = gpu(name, "H100", 0, "80Gi");
    device["taints"] = json!([{"key": "example.com/unhealthy", "value": "true", "effect": effect}]);
    device
}

fn toleration(extra: Value) -> Value {
    let mut toleration = json!({"key": "example.com/unhealthy", "operator": "Exists"});
    toleration
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    toleration
}

/// Claim `name` for one gpu with `tolerations`, and pod `name` using it.
async fn pod_with_claim(client: &Client, name: &str, tolerations: Value) {
    let request = one_request(exactly(&[], json!({"tolerations": tolerations})));
    create_claim(client, name, request).await;
    create_pod(client, name, claim_ref(name)).await;
}

async fn rule(client: &Client, name: &str, selector: Value, effect: &str) {
    let rule: DeviceTaintRule = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"deviceSelector": selector,
            "taint": {"key": "example.com/unhealthy", "value": "true", "effect": effect}}}))
    .unwrap();
    Api::<DeviceTaintRule>::all(client.clone())
        .create(&PostParams::default(), &rule)
        .await
        .unwrap();
}

async fn pod(client: &Client, name: &str) -> Option<Pod> {
    Api::<Pod>::default_namespaced(client.clone())
        .get_opt(name)
        .await
        .unwrap()
}

async fn being_deleted(client: &Client, name: &str) -> bool {
    pod(client, name)
        .await
        .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

/// The pod's `DisruptionTarget` condition: status, reason, message.
async fn disruption(client: &Client, name: &str) -> Option<(String, String, String)> {
    let conditions = pod(client, name).await?.status?.conditions?;
    let c = conditions
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")?;
    Some((
        c.status,
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

#[tokio::test]
async fn untolerated_no_schedule_devices_are_skipped_and_none_taints_do_not_count() {
    let (cluster, client) = cluster().await;
    publish(
        &client,
        "node-0",
        vec![tainted("gpu-0", "NoSchedule"), tainted("gpu-1", "None")],
    )
    .await;
    pod_with_claim(&client, "plain", json!([])).await;
    assert_eq!(bound(&client, "plain").await, "node-0");
    assert_eq!(
        claim(&client, "plain")
            .await
            .allocation()
            .unwrap()
            .devices
            .results[0]
            .device,
        "gpu-1"
    );
    pod_with_claim(&client, "waits", json!([])).await;
    let message = failed_scheduling(&client, "waits", "0/2 nodes are available").await;
    assert_eq!(
        message,
        "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    pod_with_claim(
        &client,
        "tolerant",
        json!([toleration(json!({"effect": "NoSchedule"}))]),
    )
    .await;
    bound(&client, "tolerant").await;
    let result = claim(&client, "tolerant")
        .await
        .allocation()
        .unwrap()
        .devices
        .results[0]
        .clone();
    assert_eq!(result.device, "gpu-0");
    assert_eq!(
        serde_json::to_value(&result.tolerations).unwrap(),
        json!([{"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}])
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_rule_keeps_new_pods_off_the_devices_it_selects() {
    let (cluster, client) = cluster().await;
    publish(&client, "node-0", vec![gpu("gpu-0", "H100", 0, "80Gi")]).await;
    publish(&client, "node-1", vec![gpu("gpu-0", "H100", 0, "80Gi")]).await;
    rule(
        &client,
        "cordon-node-0",
        json!({"driver": DRIVER, "pool": "node-0"}),
        "NoSchedule",
    )
    .await;
    for name in ["first", "second"] {
        pod_with_claim(&client, name, json!([])).await;
    }
    assert_eq!(bound(&client, "first").await, "node-1");
    failed_scheduling(
        &client,
        "second",
        "0/2 nodes are available: 2 cannot allocate all claims",
    )
    .await;
    Api::<DeviceTaintRule>::all(client.clone())
        .delete("cordon-node-0", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(bound(&client, "second").await, "node-0");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_no_execute_rule_evicts_untolerating_pods_now_and_time_limited_ones_later() {
    let (cluster, client) = cluster().await;
    let devices = (0..3)
        .map(|i| gpu(&format!("gpu-{i}"), "H100", 0, "80Gi"))
        .collect();
    publish(&client, "node-0", devices).await;
    let forever = toleration(json!({"effect": "NoExecute"}));
    let two_seconds = toleration(json!({"effect": "NoExecute", "tolerationSeconds": 2}));
    pod_with_claim(&client, "no-toleration", json!([])).await;
    pod_with_claim(&client, "for-2s", json!([two_seconds])).await;
    pod_with_claim(&client, "forever", json!([forever])).await;
    for name in ["no-toleration", "for-2s", "forever"] {
        assert_eq!(bound(&client, name).await, "node-0");
    }
    publish(&client, "node-1", vec![gpu("gpu-0", "H100", 0, "80Gi")]).await;
    pod_with_claim(&client, "elsewhere", json!([])).await;
    assert_eq!(bound(&client, "elsewhere").await, "node-1");

    let tainted_at = Instant::now();
    rule(
        &client,
        "unhealthy",
        json!({"driver": DRIVER, "pool": "node-0"}),
        "NoExecute",
    )
    .await;
    eventually("the untolerating pod is evicted", PATIENCE, || async {
        being_deleted(&client, "no-toleration").await.then_some(())
    })
    .await;
    assert!(
        !being_deleted(&client, "for-2s").await,
        "evicted before its tolerationSeconds"
    );
    assert_eq!(
        disruption(&client, "no-toleration").await,
        Some((
            "True".into(),
            "DeletionByDeviceTaintManager".into(),
            "Device Taint manager: deleting due to NoExecute taint".into()
        ))
    );
    assert_eq!(
        events(&client, "no-toleration", "DeviceTaintManagerEviction").await,
        ["Marking for deletion"]
    );
    eventually("the time-limited pod is evicted", PATIENCE, || async {
        being_deleted(&client, "for-2s").await.then_some(())
    })
    .await;
    assert!(
        tainted_at.elapsed() >= Duration::from_secs(1),
        "evicted after {:?}",
        tainted_at.elapsed()
    );
    let status = eventually("the rule reports the evictions", PATIENCE, || async {
        let rule = Api::<DeviceTaintRule>::all(client.clone())
            .get("unhealthy")
            .await
            .unwrap();
        let condition = rule
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "EvictionInProgress")?;
        (condition.reason == "Completed").then_some(condition)
    })
    .await;
    assert_eq!(
        (status.status.as_str(), status.message.as_str()),
        ("False", "2 pods evicted since starting the controller.")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !being_deleted(&client, "forever").await,
        "a pod tolerating forever stays"
    );
    assert!(
        !being_deleted(&client, "elsewhere").await,
        "a pod on an untainted device stays"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn removing_the_taint_before_its_time_cancels_the_eviction() {
    let (cluster, client) = cluster().await;
    publish(&client, "node-0", vec![gpu("gpu-0", "H100", 0, "80Gi")]).await;
    let three_seconds = toleration(json!({"effect": "NoExecute", "tolerationSeconds": 3}));
    pod_with_claim(&client, "patient", json!([three_seconds])).await;
    bound(&client, "patient").await;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let taint = |taints: Value| json!({"spec": {"devices": [{"name": "gpu-0", "taints": taints}]}});
    let params = PatchParams::default();
    let no_execute =
        json!([{"key": "example.com/unhealthy", "value": "true", "effect": "NoExecute"}]);
    slices
        .patch("node-0-gpu", &params, &Patch::Merge(&taint(no_execute)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    slices
        .patch("node-0-gpu", &params, &Patch::Merge(&taint(json!([]))))
        .await
        .unwrap();
    eventually("the eviction is cancelled", PATIENCE, || async {
        let notes = events(&client, "patient", "DeviceTaintManagerEviction").await;
        (notes == ["Cancelling deletion"]).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !being_deleted(&client, "patient").await,
        "evicted although the taint went away"
    );
    cluster.shutdown().await;
}
