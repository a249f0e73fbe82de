//! The example driver's current demo specs for admin access and extended resources
//! (`fixtures/dra-example-driver/v1/`, copied unchanged from kubernetes-sigs/dra-example-driver
//! `demo/examples/`), created as `kubectl create -f` creates them on the simulated 1.37 cluster,
//! with our node agent serving their driver name `gpu.example.com` and their chart's
//! `DeviceClass`. Each outcome the demos describe is checked: the admin pod gets every GPU of
//! its node although one is prepared for another claim, and takes none from later claims; the
//! extended-resource pods run, the explicit name only when the class maps it, else that pod
//! stays Pending and the scheduler says why.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_node::local::LocalSettings;
use dra_sim::cluster::ClusterHandle;
use dra_sim::{ApiOverrides, KubernetesVersion};
use dra_types::resource_v1::{DeviceClass, ResourceClaim};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::WAIT;
use crate::v1_support::{h100s, ClusterV1};

/// The example driver's name, which our agent serves here.
const EXAMPLE_DRIVER: &str = "gpu.example.com";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e/fixtures/dra-example-driver/v1")
        .join(name)
}

/// A 1.37 cluster of one node with two GPUs, its agent serving `gpu.example.com`, and the
/// example chart's `DeviceClass` (with `extendedResourceName` when `extended` is given, as
/// `--set deviceClass.extendedResourceName=...` renders it).
async fn cluster(dir: &Path, extended: Option<&str>) -> ClusterV1 {
    let settings = LocalSettings {
        driver_name: EXAMPLE_DRIVER.into(),
        gc_interval: Duration::from_secs(60),
        inventory_interval: Duration::from_secs(60),
    };
    let v1 = ClusterV1::start_release(
        dir,
        &[h100s(2)],
        (KubernetesVersion::V1_37, ApiOverrides::default()),
        &settings,
        ClusterHandle::kube_client,
    )
    .await;
    let class: DeviceClass = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": EXAMPLE_DRIVER},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
            "extendedResourceName": extended}}))
    .unwrap();
    Api::<DeviceClass>::all(v1.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    v1
}

/// Creates every object of fixture `name`, as `kubectl create -f` does.
async fn create(v1: &ClusterV1, name: &str) {
    for outcome in v1.create_file(&fixture(name)).await {
        outcome.unwrap_or_else(|error| panic!("{name}: {error}"));
    }
}

fn pods(v1: &ClusterV1, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        v1.client.clone(),
        namespace,
        &ApiResource::erase::<Pod>(&()),
    )
}

async fn running(v1: &ClusterV1, namespace: &str, name: &str) -> Value {
    eventually(format!("pod {namespace}/{name} running"), WAIT, || async {
        let pod = pods(v1, namespace).get_opt(name).await.unwrap()?;
        (pod.data["status"]["phase"] == "Running").then_some(pod.data)
    })
    .await
}

async fn claim(v1: &ClusterV1, namespace: &str, name: &str) -> ResourceClaim {
    Api::<ResourceClaim>::namespaced(v1.client.clone(), namespace)
        .get(name)
        .await
        .unwrap()
}

/// `(device, adminAccess)` of each result of the claim.
fn results(claim: &ResourceClaim) -> Vec<(String, bool)> {
    let allocation = claim.allocation().unwrap();
    allocation
        .devices
        .results
        .iter()
        .map(|r| (r.device.clone(), r.admin_access == Some(true)))
        .collect()
}

/// An ordinary pod of the default namespace with a claim for one GPU of the example class.
async fn ordinary_pod(v1: &ClusterV1, name: &str) -> ResourceClaim {
    let spec = json!({"devices": {"requests": [{"name": "gpu",
        "exactly": {"deviceClassName": EXAMPLE_DRIVER}}]}});
    v1.claim(name, spec).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "ctr0", "image": "busybox",
            "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}});
    v1.create_pod(pod).await;
    running(v1, "default", name).await;
    claim(v1, "default", name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_access_demo_gets_every_gpu_beside_their_owner_and_takes_none() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path(), None).await;
    let owner = ordinary_pod(&v1, "owner").await;
    let owners_gpu = results(&owner)[0].0.clone();

    create(&v1, "admin-access.yaml").await;
    let pod0 = running(&v1, "admin-access", "pod0").await;
    let name = pod0["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap()
        .to_owned();
    let admin = claim(&v1, "admin-access", &name).await;
    let mut got = results(&admin);
    got.sort();
    assert_eq!(
        got,
        [("gpu-0".to_owned(), true), ("gpu-1".to_owned(), true)],
        "allocationMode All with admin access: every GPU, {owners_gpu} included"
    );
    // The agent prepared it although the owner's GPU is prepared for the owner's claim.
    let specs = v1.agents.cdi_specs();
    for claim in [&owner, &admin] {
        let uid = claim.metadata.uid.clone().unwrap();
        assert!(specs.contains(&("node-0".to_owned(), uid)), "{specs:?}");
    }
    // The admin claim takes nothing: the other GPU is still there for an ordinary claim.
    let next = ordinary_pod(&v1, "next").await;
    assert_ne!(results(&next)[0].0, owners_gpu);
    assert!(!results(&next)[0].1);
    v1.shutdown().await;
}

/// Runs the extended-resource demo with the class mapping `extended`; the pods' claims.
async fn extended_resource_demo(dir: &Path, extended: Option<&str>) -> (ClusterV1, Value) {
    let v1 = cluster(dir, extended).await;
    create(&v1, "extended-resource-request.yaml").await;
    let pod0 = running(&v1, "extended-resource-request", "pod0").await;
    (v1, pod0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extended_resource_demo_runs_both_pods_when_the_class_maps_the_explicit_name() {
    let dir = tempfile::tempdir().unwrap();
    let (v1, pod0) = extended_resource_demo(dir.path(), Some("example.com/gpu")).await;
    let pod1 = running(&v1, "extended-resource-request", "pod1").await;
    let mut devices = Vec::new();
    for (pod, resource) in [
        (&pod0, "deviceclass.resource.kubernetes.io/gpu.example.com"),
        (&pod1, "example.com/gpu"),
    ] {
        let status = &pod["status"]["extendedResourceClaimStatus"];
        assert_eq!(
            status["requestMappings"],
            json!([{"containerName": "ctr0", "resourceName": resource,
                "requestName": "container-0-request-0"}])
        );
        let name = status["resourceClaimName"].as_str().unwrap();
        let made = claim(&v1, "extended-resource-request", name).await;
        let uid = made.metadata.uid.clone().unwrap();
        assert!(v1.agents.cdi_specs().contains(&("node-0".to_owned(), uid)));
        devices.extend(results(&made));
    }
    devices.sort();
    assert_eq!(
        devices,
        [("gpu-0".to_owned(), false), ("gpu-1".to_owned(), false)],
        "one GPU each"
    );
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_mapping_the_explicit_name_pod_stays_pending_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (v1, _) = extended_resource_demo(dir.path(), None).await;
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(
        v1.client.clone(),
        "extended-resource-request",
    );
    let message = eventually("FailedScheduling for pod1", WAIT, || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("pod1"))
            .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
            .and_then(|e| e.message)
    })
    .await;
    assert_eq!(
        message,
        "0/1 nodes are available: 1 Insufficient example.com/gpu. preemption: 0/1 nodes are \
         available: 1 No preemption victims found for incoming pod."
    );
    let pod1 = pods(&v1, "extended-resource-request")
        .get("pod1")
        .await
        .unwrap();
    assert_eq!(pod1.data["status"]["phase"], "Pending");
    v1.shutdown().await;
}
