//! The example driver's current demo specs for admin access and extended resources
//! (`fixtures/dra-example-driver/v1/`, copied unchanged from kubernetes-sigs/dra-example-driver
//! `demo/examples/`), created as `kubectl create -f` creates them on the simulated 1.37 cluster,
//! with our node agent serving their driver name `gpu.example.com` and their chart's
//! `DeviceClass`. Each outcome the demos describe is checked: the admin pod gets every GPU of
//! its node although one is prepared for another claim, and takes none from later claims; the
//! extended-resource pods run, the explicit name only when the class maps it, else that pod
//! stays Pending and the scheduler says why. With `dra-ledger run` mirroring, the admin claim
//! is listed apart from the allocations and the GPU it looks at counts once.

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

use dra_allocator::ledger::{AdminAccessRequest, ClaimRef};
use dra_controller::process::{ProcessConfig, RunningController};
use dra_types::api_mode::DraApi;
use kube::api::DeleteParams;

use crate::e2e_support::WAIT;
use crate::v1_mirror::{call, call_text, get, reconcile, settings, start_ready};
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
    cluster_reading_every(dir, extended, Duration::from_secs(60)).await
}

/// [`cluster`] whose agent reads its inventory file every `inventory_interval`.
pub(crate) async fn cluster_reading_every(
    dir: &Path,
    extended: Option<&str>,
    inventory_interval: Duration,
) -> ClusterV1 {
    let settings = LocalSettings {
        driver_name: EXAMPLE_DRIVER.into(),
        gc_interval: Duration::from_secs(60),
        inventory_interval,
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
pub(crate) async fn create(v1: &ClusterV1, name: &str) {
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

pub(crate) async fn running(v1: &ClusterV1, namespace: &str, name: &str) -> Value {
    eventually(format!("pod {namespace}/{name} running"), WAIT, || async {
        let pod = pods(v1, namespace).get_opt(name).await.unwrap()?;
        (pod.data["status"]["phase"] == "Running").then_some(pod.data)
    })
    .await
}

pub(crate) async fn claim(v1: &ClusterV1, namespace: &str, name: &str) -> ResourceClaim {
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

/// Creates the admin-access demo and waits for its pod to run: the pod's claim.
async fn admin_demo(v1: &ClusterV1) -> ResourceClaim {
    create(v1, "admin-access.yaml").await;
    let pod0 = running(v1, "admin-access", "pod0").await;
    let name = pod0["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap()
        .to_owned();
    claim(v1, "admin-access", &name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_access_demo_gets_every_gpu_beside_their_owner_and_takes_none() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path(), None).await;
    let owner = ordinary_pod(&v1, "owner").await;
    let owners_gpu = results(&owner)[0].0.clone();

    let admin = admin_demo(&v1).await;
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

/// The admin-access claims of `GET /v1/claims`: `(uid, node, devices)`.
async fn ledger_admin_access(controller: &RunningController) -> Vec<(String, String, Vec<String>)> {
    let claims = get(controller, "/v1/claims").await;
    claims["adminAccess"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let mut devices: Vec<String> = serde_json::from_value(a["devices"].clone()).unwrap();
            devices.sort();
            (
                a["uid"].as_str().unwrap().to_owned(),
                a["node"].as_str().unwrap().to_owned(),
                devices,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirror_lists_the_admin_access_demo_apart_and_counts_the_owners_gpu_once() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path(), None).await;
    let config = ProcessConfig {
        driver_name: EXAMPLE_DRIVER.into(),
        ..settings(dir.path(), DraApi::V1)
    };
    let controller = start_ready(&v1, config).await;
    let owner = ordinary_pod(&v1, "owner").await;
    let owner_uid = owner.metadata.uid.clone().unwrap();
    let owners_gpu = results(&owner)[0].0.clone();

    let admin = admin_demo(&v1).await;
    let name = admin.metadata.name.clone().unwrap();
    let admin_uid = admin.metadata.uid.clone().unwrap();

    // `/v1/claims`: the owner's allocation among the items, the admin claim apart.
    let expected = vec![(
        admin_uid.clone(),
        "node-0".to_owned(),
        vec!["gpu-0".to_owned(), "gpu-1".to_owned()],
    )];
    eventually("the admin access in the ledger", WAIT, || async {
        (ledger_admin_access(&controller).await == expected).then_some(())
    })
    .await;
    let claims = get(&controller, "/v1/claims").await;
    let items: Vec<&str> = claims["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["uid"].as_str().unwrap())
        .collect();
    assert_eq!(items, [owner_uid.as_str()]);
    let detail = get(&controller, &format!("/v1/claims/{admin_uid}")).await;
    assert_eq!(detail["allocation"], Value::Null);
    assert_eq!(detail["adminAccess"]["namespace"], "admin-access");
    assert_eq!(detail["adminAccess"]["name"], name.as_str());

    // `/v1/nodes` counts it apart; the owner's GPU is allocated once, to the owner only.
    let nodes = get(&controller, "/v1/nodes").await;
    assert_eq!(nodes["items"][0]["adminAccess"], 1);
    assert_eq!(nodes["items"][0]["devices"]["total"], 2);
    assert_eq!(nodes["items"][0]["devices"]["allocated"], 1);
    let devices = get(&controller, "/v1/nodes/node-0/devices").await;
    let gpu = devices["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == owners_gpu.as_str())
        .unwrap();
    assert_eq!(gpu["consumers"].as_array().unwrap().len(), 1, "{gpu}");
    assert_eq!(gpu["consumers"][0]["claimUid"], owner_uid.as_str());
    assert_eq!(gpu["adminAccess"], json!([admin_uid]));
    let utilisation = get(&controller, "/v1/utilisation").await;
    assert_eq!(utilisation["totals"]["allocated"], 1);
    assert_eq!(utilisation["totals"]["free"], 1);
    assert_eq!(utilisation["claimsAllocated"], 1);
    let (_, metrics) = call_text(&controller, "GET", "/metrics", false).await;
    for series in [
        "dra_ledger_allocations_total{mode=\"mirrored\",outcome=\"admin_access\"} 1",
        "dra_ledger_allocations_total{mode=\"mirrored\",outcome=\"allocated\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} missing from\n{metrics}");
    }

    repairs_admin_access_behind_the_mirrors_back(&v1, &controller, &name, &expected).await;

    // The admin pod goes, its claim with it: the ledger releases the admin access only.
    pods(&v1, "admin-access")
        .delete("pod0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the admin access released", WAIT, || async {
        ledger_admin_access(&controller)
            .await
            .is_empty()
            .then_some(())
    })
    .await;
    let (status, _) = call(
        &controller,
        "GET",
        &format!("/v1/claims/{admin_uid}"),
        false,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        get(&controller, "/v1/nodes").await["items"][0]["devices"]["allocated"],
        1
    );
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}

/// Releases the admin access of the demo's claim `name` and records an orphan one behind the
/// mirror's back: a reconcile counts both and brings back `expected`.
async fn repairs_admin_access_behind_the_mirrors_back(
    v1: &ClusterV1,
    controller: &RunningController,
    name: &str,
    expected: &[(String, String, Vec<String>)],
) {
    // Behind the mirror's back: the admin access released, an orphan one recorded. Once the
    // agent has written the claim's device status, nothing makes the watch look at it again.
    eventually("the admin claim's device status", WAIT, || async {
        let status = claim(v1, "admin-access", name).await.status;
        let status = serde_json::to_value(status).unwrap();
        (status["devices"].as_array().map_or(0, Vec::len) == 2).then_some(())
    })
    .await;
    assert_eq!(reconcile(controller).await["drift"]["missing_in_ledger"], 0);
    let ledger = controller.ledger().clone();
    let key = expected[0].0.clone();
    tokio::task::spawn_blocking(move || {
        ledger.release_admin_access(&key).unwrap().unwrap();
        ledger
            .record_admin_access(AdminAccessRequest {
                claim: ClaimRef::new("orphan-uid", "admin-access", "orphan"),
                node: "node-0".to_owned(),
                devices: vec!["gpu-0".to_owned()],
            })
            .unwrap();
    })
    .await
    .unwrap();
    let report = reconcile(controller).await;
    assert_eq!(report["drift"]["missing_in_ledger"], 1, "{report}");
    assert_eq!(report["drift"]["orphan_in_ledger"], 1, "{report}");
    assert_eq!(ledger_admin_access(controller).await, expected);
    let report = reconcile(controller).await;
    assert_eq!(report["drift"]["missing_in_ledger"], 0, "{report}");
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
