//! Extended resources backed by DRA in the simulated scheduler (1.36+, `DRAExtendedResource`):
//! a pod limiting a class's `extendedResourceName` or the implicit
//! `deviceclass.resource.kubernetes.io/<class>` gets a claim the scheduler makes (annotation,
//! owner, one request per container resource), allocated and reserved for it and named in
//! `status.extendedResourceClaimStatus`; the pod runs to its end and the claim goes with it. A
//! name no class maps, and any such name on 1.35 (gate off), leaves the pod Pending with the
//! fit error of a missing resource.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use testkit::eventually;

use crate::scheduling_v1::{bound, claim, cluster_at, create, failed_scheduling, gpu, publish};
use dra_sim::KubernetesVersion;
use dra_types::resource_v1::{DeviceClass, ResourceClaim};

const PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

/// A pod whose one container limits `resource` to `count`, done `run` seconds after it starts.
async fn pod_asking(client: &Client, name: &str, resource: &str, count: u32, run: &str) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"sim.dra-ledger.io/run-seconds": run}},
        "spec": {"containers": [{"name": "ctr0", "image": "busybox",
            "resources": {"limits": {resource: count.to_string()}}}]}});
    Api::<Pod>::default_namespaced(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
}

/// The pod as stored, with the fields the 1.30 pod type lacks.
async fn raw_pod(client: &Client, name: &str) -> Value {
    let api: Api<DynamicObject> =
        Api::default_namespaced_with(client.clone(), &ApiResource::erase::<Pod>(&()));
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

async fn phase(client: &Client, name: &str) -> Option<String> {
    raw_pod(client, name).await["status"]["phase"]
        .as_str()
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_limiting_implicit_and_explicit_names_get_a_claim_made_for_them_and_run() {
    let (_cluster, client) = cluster_at(KubernetesVersion::V1_37).await;
    create(
        &client,
        ApiResource::erase::<DeviceClass>(&()),
        json!({"metadata": {"name": "gpu-explicit"}, "spec": {
            "selectors": [{"cel": {"expression": "device.driver == \"gpu.dra-ledger.io\""}}],
            "extendedResourceName": "gpu.dra-ledger.io/gpu"}}),
    )
    .await;
    publish(
        &client,
        "node-1",
        vec![
            gpu("gpu-0", "H100", 0, "80Gi"),
            gpu("gpu-1", "H100", 0, "80Gi"),
        ],
    )
    .await;

    pod_asking(
        &client,
        "implicit",
        "deviceclass.resource.kubernetes.io/gpu",
        1,
        // Held until the explicit pod has its device, so the two must differ; a busy machine
        // took over 2 s between the two allocations, after which the first device is free
        // again and may rightly be given twice.
        "10",
    )
    .await;
    assert_eq!(bound(&client, "implicit").await, "node-1");
    let status =
        raw_pod(&client, "implicit").await["status"]["extendedResourceClaimStatus"].clone();
    let claim_name = status["resourceClaimName"].as_str().unwrap().to_owned();
    assert!(
        claim_name.starts_with("implicit-extended-resources-"),
        "{status}"
    );
    assert_eq!(
        status["requestMappings"],
        json!([{"containerName": "ctr0",
            "resourceName": "deviceclass.resource.kubernetes.io/gpu",
            "requestName": "container-0-request-0"}])
    );
    let made: ResourceClaim = claim(&client, &claim_name).await;
    let made = serde_json::to_value(&made).unwrap();
    assert_eq!(
        made["metadata"]["annotations"],
        json!({"resource.kubernetes.io/extended-resource-claim": "true"})
    );
    assert_eq!(made["metadata"]["ownerReferences"][0]["kind"], "Pod");
    assert_eq!(made["metadata"]["ownerReferences"][0]["name"], "implicit");
    assert_eq!(made["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(
        made["spec"]["devices"]["requests"],
        json!([{"name": "container-0-request-0", "exactly": {"deviceClassName": "gpu",
            "allocationMode": "ExactCount", "count": 1}}])
    );
    assert_eq!(
        made["status"]["allocation"]["devices"]["results"][0]["request"],
        "container-0-request-0"
    );
    assert_eq!(made["status"]["reservedFor"][0]["name"], "implicit");

    pod_asking(&client, "explicit", "gpu.dra-ledger.io/gpu", 1, "2").await;
    assert_eq!(bound(&client, "explicit").await, "node-1");
    let status =
        raw_pod(&client, "explicit").await["status"]["extendedResourceClaimStatus"].clone();
    let explicit_claim = status["resourceClaimName"].as_str().unwrap().to_owned();
    let explicit: ResourceClaim = claim(&client, &explicit_claim).await;
    let request = &explicit.spec.devices.requests[0];
    assert_eq!(
        request.exactly.as_ref().unwrap().device_class_name,
        "gpu-explicit"
    );
    let devices = |c: &ResourceClaim| c.allocation().unwrap().devices.results[0].device.clone();
    assert_ne!(
        devices(&explicit),
        made["status"]["allocation"]["devices"]["results"][0]["device"]
    );

    // Both run to their end; the claims made for them go with them.
    for (pod, claim_name) in [("implicit", &claim_name), ("explicit", &explicit_claim)] {
        eventually(format!("pod {pod} Succeeded"), PATIENCE, || async {
            (phase(&client, pod).await.as_deref() == Some("Succeeded")).then_some(())
        })
        .await;
        eventually(format!("claim {claim_name} deleted"), PATIENCE, || async {
            let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
            claims
                .get_opt(claim_name)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        })
        .await;
    }

    pod_asking(&client, "unmapped", "example.com/fpga", 1, "1").await;
    failed_scheduling(
        &client,
        "unmapped",
        "0/2 nodes are available: 2 Insufficient example.com/fpga. preemption: 0/2 nodes are \
         available: 2 No preemption victims found for incoming pod.",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_a_class_name_is_a_resource_no_node_has() {
    let (_cluster, client) = cluster_at(KubernetesVersion::V1_35).await;
    publish(&client, "node-1", vec![gpu("gpu-0", "H100", 0, "80Gi")]).await;
    pod_asking(
        &client,
        "implicit",
        "deviceclass.resource.kubernetes.io/gpu",
        1,
        "1",
    )
    .await;
    failed_scheduling(
        &client,
        "implicit",
        "0/2 nodes are available: 2 Insufficient deviceclass.resource.kubernetes.io/gpu.",
    )
    .await;
    assert_eq!(phase(&client, "implicit").await.as_deref(), Some("Pending"));
}
