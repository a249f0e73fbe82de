//! Users of the dra-example-driver switching to dra-ledger (`docs/migrating.md`): the example
//! driver's `v1alpha2` demo specs (`fixtures/dra-example-driver/gpu-test1..4.yaml`, copied unchanged
//! from upstream) applied with `kubectl apply -f` to the simulated cluster with our driver, with
//! only the `ResourceClass` replaced by `deploy/examples/example-driver/resourceclass.yaml`, and
//! gpu-test4 in its rewritten form (`deploy/examples/example-driver/gpu-test4.yaml`). Without the class default
//! `shareable: true` the second pod of gpu-test3 waits and the scheduler says why.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1alpha2::{ResourceClaim, ResourceClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use testkit::eventually;

use crate::e2e_support::{create_document, node, Env, Running, DRIVER, WAIT};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e/fixtures/dra-example-driver")
        .join(name)
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/examples/example-driver")
        .join(name)
}

fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    match lower.as_str() {
        "resourceclass" => "resourceclasses".into(),
        _ if lower.ends_with('s') => lower,
        _ => format!("{lower}s"),
    }
}

/// Creates every object of the multi-document YAML file, as `kubectl create -f` does.
async fn apply(client: &Client, file: &Path) {
    let text = std::fs::read_to_string(file).expect("spec file");
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: serde_json::Value = serde::Deserialize::deserialize(doc).expect("YAML");
        if value.is_null() {
            continue;
        }
        if let Err(error) = create_document(client, value, plural).await {
            panic!("{error}");
        }
    }
}

/// `kubectl apply -f file` against the environment's in-process cluster, as a user applies the
/// upstream specs. `None` when kubectl is not installed (then the test is skipped, or fails
/// under CI).
async fn kubectl_apply(env: &Env, file: &Path) -> Option<()> {
    let kubectl = testkit::require_tool("kubectl", "the Kubernetes CLI")?;
    let kubeconfig = env.ledger_path().with_file_name("kubeconfig");
    let cluster = env.cluster.as_ref().expect("in-process cluster");
    cluster.server().write_kubeconfig(&kubeconfig).unwrap();
    let output = tokio::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "-f"])
        .arg(file)
        .output()
        .await
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl apply -f {}: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(())
}

async fn phase(client: &Client, namespace: &str, name: &str) -> Option<String> {
    let pod = Api::<Pod>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .ok()??;
    pod.status?.phase
}

async fn wait_running(client: &Client, pods: &[(&str, &str)]) {
    for (namespace, name) in pods {
        eventually(format!("{namespace}/{name} runs"), WAIT, || async {
            phase(client, namespace, name).await.as_deref() == Some("Running")
        })
        .await;
    }
}

async fn claims(client: &Client, namespace: &str) -> Vec<ResourceClaim> {
    Api::<ResourceClaim>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .expect("claims listed")
        .items
}

fn devices(claim: &ResourceClaim) -> Vec<String> {
    match dra_controller::driver::handle::claim_allocation(claim, DRIVER) {
        Ok(dra_controller::driver::handle::ClaimAllocationState::Ours(data)) => data
            .devices
            .iter()
            .map(|d| format!("{}/{d}", data.node))
            .collect(),
        _ => Vec::new(),
    }
}

/// The note of the newest `reason` event about pod `namespace/name`.
pub async fn pod_event(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Option<String> {
    Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .max_by_key(|e| e.event_time.as_ref().map(|t| t.0))
        .and_then(|e| e.note)
}

#[tokio::test]
async fn example_driver_v1alpha2_demo_runs_with_only_the_resource_class_changed() {
    let env = Env::start(&[
        node("node-a", "H100", "80Gi", &[0, 0, 0, 0, 1, 1, 1, 1]),
        node("node-b", "H100", "80Gi", &[0, 0, 0, 0, 1, 1, 1, 1]),
    ])
    .await;
    let running = Running::start(&env.client, &env.ledger_path(), 4).await;
    // As a user coming from the example driver: kubectl apply of its specs, unchanged.
    for file in [
        example("resourceclass.yaml"),
        fixture("gpu-test1.yaml"),
        fixture("gpu-test2.yaml"),
        fixture("gpu-test3.yaml"),
        example("gpu-test4.yaml"),
    ] {
        if kubectl_apply(&env, &file).await.is_none() {
            return;
        }
    }
    wait_running(
        &env.client,
        &[
            ("gpu-test1", "pod0"),
            ("gpu-test1", "pod1"),
            ("gpu-test2", "pod0"),
            ("gpu-test3", "pod0"),
            ("gpu-test3", "pod1"),
            ("gpu-test4", "pod0"),
        ],
    )
    .await;

    // gpu-test1: two pods, one distinct device each.
    let test1: Vec<Vec<String>> = claims(&env.client, "gpu-test1")
        .await
        .iter()
        .map(devices)
        .collect();
    assert_eq!(test1.len(), 2);
    assert!(
        test1.iter().all(|d| d.len() == 1) && test1[0] != test1[1],
        "{test1:?}"
    );
    // gpu-test3: one claim, one device, reserved for both pods.
    let test3 = claims(&env.client, "gpu-test3").await;
    assert_eq!(test3.len(), 1);
    let reserved = test3[0]
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.clone())
        .unwrap_or_default();
    assert_eq!(reserved.len(), 2, "both pods use the shared claim");
    assert_eq!(devices(&test3[0]).len(), 1);
    // gpu-test4: four devices on one node.
    let test4 = claims(&env.client, "gpu-test4").await;
    let four = devices(&test4[0]);
    assert_eq!(four.len(), 4, "{four:?}");
    let node = four[0].split('/').next().unwrap_or_default();
    assert!(four.iter().all(|d| d.starts_with(&format!("{node}/"))));
    assert!(pod_event(&env.client, "gpu-test4", "pod0", "Scheduled")
        .await
        .is_some_and(|n| n.starts_with("Successfully assigned gpu-test4/pod0 to ")));
    running.stop().await;
    env.shutdown().await;
}

#[tokio::test]
async fn without_class_shareable_the_second_pod_of_a_global_claim_waits_and_says_why() {
    let env = Env::start(&[node("node-a", "H100", "80Gi", &[0, 0])]).await;
    let running = Running::start(&env.client, &env.ledger_path(), 2).await;
    let class = ResourceClass {
        metadata: ObjectMeta {
            name: Some("gpu.example.com".into()),
            ..ObjectMeta::default()
        },
        driver_name: DRIVER.into(),
        ..ResourceClass::default()
    };
    Api::<ResourceClass>::all(env.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("class created");
    apply(&env.client, &fixture("gpu-test3.yaml")).await;
    let (note, waiting) = eventually(
        "a FailedScheduling event names the claim in use",
        WAIT,
        || async {
            let phases = (
                phase(&env.client, "gpu-test3", "pod0").await,
                phase(&env.client, "gpu-test3", "pod1").await,
            );
            let waiting = match &phases {
                (Some(a), _) if a == "Running" => "pod1",
                (_, Some(b)) if b == "Running" => "pod0",
                _ => return None,
            };
            let note = pod_event(&env.client, "gpu-test3", waiting, "FailedScheduling").await?;
            note.contains("resourceclaim in use")
                .then_some((note, waiting))
        },
    )
    .await;
    assert_eq!(
        note,
        "0/1 nodes are available: resourceclaim in use. preemption: 0/1 nodes are available: \
         1 Preemption is not helpful for scheduling., no new claims to deallocate"
    );

    // `dra-ledger explain pod` names the claim, its user and the fix.
    let facts = dra_controller::explain::gather(&env.client, "gpu-test3", waiting)
        .await
        .expect("facts gathered");
    let report = dra_controller::explain::report(&facts, DRIVER);
    println!("{report}");
    let other = if waiting == "pod0" { "pod1" } else { "pod0" };
    assert!(
        report.starts_with(&format!(
            "pod gpu-test3/{waiting}: Pending, not scheduled\n"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!("not shareable; reserved for {other}")),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "why: claim shared-gpu is in use by pod gpu-test3/{other} and not shareable"
        )),
        "{report}"
    );
    let running_pod = dra_controller::explain::gather(&env.client, "gpu-test3", other)
        .await
        .expect("facts gathered");
    let text = dra_controller::explain::report(&running_pod, DRIVER);
    assert!(
        text.starts_with(&format!("pod gpu-test3/{other}: Running on node-a\n")),
        "{text}"
    );
    assert!(!text.contains("why:"), "{text}");
    running.stop().await;
    env.shutdown().await;
}
