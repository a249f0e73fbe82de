//! The example driver's device-taint demos (`demo/examples/device-taints-tolerations/*` of
//! kubernetes-sigs/dra-example-driver, copied unchanged under
//! `fixtures/dra-example-driver/device-taints-tolerations/`) run against a simulated 1.37 with
//! `--runtime-config=resource.k8s.io/v1beta2=true`, as their READMEs ask, and our agents serving
//! the example driver's name (`gpu.example.com`, with a `DeviceClass` of that name selecting
//! its devices, as the example driver's chart installs). Each test shows what each step leads
//! to. Where a README expects otherwise, the outcome is upstream's code's: the scheduler does
//! not allocate a device with an untolerated `NoExecute` taint (`taintPreventsAllocation`), so
//! a pod created after a `NoExecute` rule without a toleration stays Pending instead of being
//! scheduled and evicted; and `4-pod-not-scheduled.yaml` has no `apiVersion`, so it cannot be
//! created as written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_node::local::LocalSettings;
use dra_sim::cluster::ClusterHandle;
use dra_sim::{ApiOverrides, KubernetesVersion};
use dra_types::resource_v1::DeviceTaintRule;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::ListParams;
use kube::Api;
use testkit::eventually;

use crate::e2e_support::WAIT;
use crate::v1_support::{h100s, ClusterV1};

const DRIVER: &str = "gpu.example.com";
const NAMESPACE: &str = "basic-resourceclaimtemplate";

fn spec(scenario: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e/fixtures/dra-example-driver/device-taints-tolerations")
        .join(scenario)
        .join(file)
}

/// A 1.37 cluster serving `resource.k8s.io/v1beta2`, two nodes of four GPUs with agents of
/// the example driver's name, and its `DeviceClass`.
async fn cluster(dir: &Path) -> ClusterV1 {
    let settings = LocalSettings {
        driver_name: DRIVER.into(),
        gc_interval: Duration::from_secs(60),
        inventory_interval: Duration::from_secs(60),
    };
    let api = ApiOverrides {
        runtime_config: "resource.k8s.io/v1beta2=true".parse().unwrap(),
        ..ApiOverrides::default()
    };
    let v1 = ClusterV1::start_release(
        dir,
        &[h100s(4), h100s(4)],
        (KubernetesVersion::V1_37, api),
        &settings,
        ClusterHandle::kube_client,
    )
    .await;
    v1.device_class(DRIVER, &format!("device.driver == {DRIVER:?}"))
        .await;
    v1
}

/// Creates every object of the scenario's file, which must all be created.
async fn create(v1: &ClusterV1, scenario: &str, file: &str) {
    for outcome in v1.create_file(&spec(scenario, file)).await {
        outcome.unwrap_or_else(|e| panic!("{scenario}/{file}: {e}"));
    }
}

async fn pod(v1: &ClusterV1, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(v1.client.clone(), NAMESPACE)
        .get_opt(name)
        .await
        .unwrap()
}

/// Waits until the pod runs.
async fn running(v1: &ClusterV1, name: &str) {
    eventually(format!("{name} runs"), WAIT, || async {
        let phase = pod(v1, name).await?.status?.phase?;
        (phase == "Running").then_some(())
    })
    .await;
}

/// Whether the pod is gone or being deleted.
async fn evicted(v1: &ClusterV1, name: &str) -> bool {
    pod(v1, name)
        .await
        .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

/// The messages of the core events with `reason` about pod `name`.
async fn events(v1: &ClusterV1, name: &str, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(v1.client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

/// Waits until pod `name` is evicted by the device-taint eviction controller.
async fn evicted_by_taint(v1: &ClusterV1, name: &str) {
    eventually(format!("{name} is evicted"), WAIT, || async {
        let marked = events(v1, name, "DeviceTaintManagerEviction").await;
        (evicted(v1, name).await && marked == ["Marking for deletion"]).then_some(())
    })
    .await;
}

/// Waits until the rule's `EvictionInProgress` condition has `reason` and `message`; its
/// status.
async fn rule_condition(v1: &ClusterV1, reason: &str, message: &str) -> String {
    eventually(
        format!("the rule reports {reason}: {message}"),
        WAIT,
        || async {
            let rule = Api::<DeviceTaintRule>::all(v1.client.clone())
                .get("example")
                .await
                .unwrap();
            let condition = rule
                .status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "EvictionInProgress")?;
            (condition.reason == reason && condition.message == message).then_some(condition.status)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_schedule_keeps_the_running_pod_and_new_ones_off_the_devices() {
    let scenario = "device-taint-pod-noschedule";
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path()).await;
    create(&v1, scenario, "1-basic-resourceclaimtemplate.yaml").await;
    create(&v1, scenario, "2-pod-keeps-running.yaml").await;
    running(&v1, "pod-keeps-running").await;
    create(&v1, scenario, "3-device-taint-rule.yaml").await;
    let outcomes = v1
        .create_file(&spec(scenario, "4-pod-not-scheduled.yaml"))
        .await;
    assert_eq!(outcomes, [Err("Object 'apiVersion' is missing".to_owned())]);
    // The same pod with its apiVersion: no untainted device is left for it.
    let text = std::fs::read_to_string(spec(scenario, "4-pod-not-scheduled.yaml")).unwrap();
    let mut value: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    value["apiVersion"] = "v1".into();
    let file = dir.path().join("4-pod-not-scheduled-with-api-version.yaml");
    std::fs::write(&file, serde_yaml::to_string(&value).unwrap()).unwrap();
    assert!(v1.create_file(&file).await[0].is_ok());
    let note = v1.failed_scheduling(NAMESPACE, "pod-no-schedule").await;
    assert!(
        note.starts_with("0/2 nodes are available: 2 cannot allocate all claims."),
        "{note}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        pod(&v1, "pod-keeps-running")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Running")
    );
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_execute_evicts_the_running_pod_and_keeps_the_new_one_pending() {
    let scenario = "device-taint-pod-noexecute";
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path()).await;
    create(&v1, scenario, "1-basic-resourceclaimtemplate.yaml").await;
    create(&v1, scenario, "2-pod-to-be-evicted.yaml").await;
    running(&v1, "pod-to-be-evicted").await;
    create(&v1, scenario, "3-device-taint-rule.yaml").await;
    evicted_by_taint(&v1, "pod-to-be-evicted").await;
    create(&v1, scenario, "4-pod-no-execute.yaml").await;
    let note = v1.failed_scheduling(NAMESPACE, "pod-no-execute").await;
    assert!(
        note.starts_with("0/2 nodes are available: 2 cannot allocate all claims."),
        "{note}"
    );
    let evicted = "1 pod evicted since starting the controller.";
    assert_eq!(rule_condition(&v1, "Completed", evicted).await, "False");
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_no_execute_rule_only_the_tolerating_pod_runs() {
    let scenario = "device-taint-pod-toleration";
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path()).await;
    create(&v1, scenario, "1-device-taint-rule.yaml").await;
    create(&v1, scenario, "2-basic-resourceclaimtemplate.yaml").await;
    running(&v1, "pod-with-toleration").await;
    let note = v1
        .failed_scheduling(NAMESPACE, "pod-without-toleration")
        .await;
    assert!(
        note.starts_with("0/2 nodes are available: 2 cannot allocate all claims."),
        "{note}"
    );
    let status = rule_condition(&v1, "NotStarted", "").await;
    assert_eq!(status, "False");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!evicted(&v1, "pod-with-toleration").await);
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toleration_seconds_hold_the_eviction_back_while_the_untolerating_pod_goes_now() {
    let scenario = "device-taint-configurable-pod-eviction-time";
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path()).await;
    create(&v1, scenario, "1-basic-resourceclaimtemplate.yaml").await;
    for name in [
        "pod-no-toleration",
        "pod-with-toleration",
        "pod-with-300s-toleration",
    ] {
        running(&v1, name).await;
    }
    create(&v1, scenario, "2-device-taint-rule.yaml").await;
    evicted_by_taint(&v1, "pod-no-toleration").await;
    let message =
        "1 pod needs to be evicted in 1 namespace. 1 pod evicted since starting the controller.";
    assert_eq!(
        rule_condition(&v1, "PodsPendingEviction", message).await,
        "True"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !evicted(&v1, "pod-with-300s-toleration").await,
        "300 s have not passed"
    );
    assert!(!evicted(&v1, "pod-with-toleration").await);
    v1.shutdown().await;
}
