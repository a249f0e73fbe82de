//! One overlay per group of supported releases where the manifests differ: the 1.34 overlay for
//! 1.34 and 1.35, the 1.36 overlay for 1.36 and 1.37, which differs only in the `DeviceClass` of
//! every device mapping the extended resource name `gpu.dra-ledger.io/gpu`. Each overlay
//! validates against the schemas of its releases and its `DeviceClasses` are applied to the
//! simulated releases it targets; on 1.37 a pod asking for `gpu.dra-ledger.io/gpu` runs on a
//! device the node agent prepared, and the controller's mirror records the claim the scheduler
//! made for it.

use std::sync::Arc;

use dra_allocator::ledger::Ledger;
use dra_controller::mirror::{run_mirror, Mirror, MirrorConfig};
use dra_sim::server::{ServerConfig, SimServer};
use dra_sim::KubernetesVersion;
use dra_types::resource_v1::DeviceClass;
use kube::api::PostParams;
use kube::Api;
use serde_json::json;
use testkit::eventually;

use crate::deploy_support::{kubernetes_validate, render_overlay, Document, Rendered};
use crate::e2e_support::{DRIVER, WAIT};
use crate::v1_support::{h100s, ClusterV1};

/// The extended resource name the 1.36 overlay maps.
const EXTENDED: &str = "gpu.dra-ledger.io/gpu";

/// The overlays and the releases each targets.
const OVERLAYS: [(&str, [KubernetesVersion; 2]); 2] = [
    (
        "kubernetes-1.34",
        [KubernetesVersion::V1_34, KubernetesVersion::V1_35],
    ),
    (
        "kubernetes-1.36",
        [KubernetesVersion::V1_36, KubernetesVersion::V1_37],
    ),
];

fn classes(rendered: &Rendered) -> Vec<&Document> {
    rendered
        .documents
        .iter()
        .filter(|d| d.kind() == "DeviceClass")
        .collect()
}

#[test]
fn the_1_36_overlay_is_the_1_34_one_with_the_extended_resource_mapping_and_validates() {
    let (Some(old), Some(new)) = (
        render_overlay("kubernetes-1.34"),
        render_overlay("kubernetes-1.36"),
    ) else {
        return;
    };
    assert_eq!(old.documents.len(), new.documents.len());
    for (before, after) in old.documents.iter().zip(&new.documents) {
        let mut expected = before.value.clone();
        if before.kind() == "DeviceClass" && before.name() == DRIVER {
            expected["spec"]["extendedResourceName"] = json!(EXTENDED);
        }
        assert_eq!(after.value, expected, "{} {}", after.kind(), after.name());
    }
    assert!(classes(&old)
        .iter()
        .all(|c| c.value["spec"].get("extendedResourceName").is_none()));
    for version in ["1.36.0", "1.37.0"] {
        let Some(validation) = kubernetes_validate(version, &[new.file.path().to_owned()]) else {
            return;
        };
        let report = validation.lines.join("\n");
        assert!(validation.success, "{version}:\n{report}");
        let passed = report.matches(" passed for resource ").count();
        assert_eq!(passed, new.documents.len(), "{version}:\n{report}");
    }
}

#[tokio::test]
async fn each_overlays_device_classes_apply_to_the_releases_it_targets() {
    for (overlay, releases) in OVERLAYS {
        let Some(rendered) = render_overlay(overlay) else {
            return;
        };
        for version in releases {
            let server = SimServer::start(ServerConfig {
                kubernetes_version: version,
                ..ServerConfig::default()
            })
            .await
            .unwrap();
            let api = Api::<DeviceClass>::all(server.kube_client().unwrap());
            for document in classes(&rendered) {
                let class: DeviceClass = document.parse();
                let created = api.create(&PostParams::default(), &class).await;
                let created = created.unwrap_or_else(|e| panic!("{overlay} on {version}: {e}"));
                let mapped = created.spec.extended_resource_name.as_deref();
                let expected =
                    (overlay == "kubernetes-1.36" && document.name() == DRIVER).then_some(EXTENDED);
                assert_eq!(
                    mapped,
                    expected,
                    "{overlay} on {version}: {}",
                    document.name()
                );
            }
            server.shutdown().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_1_37_a_pod_asking_for_the_mapped_name_runs_on_a_prepared_device_and_is_mirrored() {
    let Some(rendered) = render_overlay("kubernetes-1.36") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let v1 = ClusterV1::start_on(KubernetesVersion::V1_37, dir.path(), &[h100s(2)]).await;
    let api = Api::<DeviceClass>::all(v1.client.clone());
    for document in classes(&rendered) {
        api.create(&PostParams::default(), &document.parse())
            .await
            .unwrap();
    }
    let ledger = Ledger::open(dir.path().join("ledger.redb"), DRIVER).unwrap();
    let mirror = Arc::new(Mirror::new(
        ledger.clone(),
        v1.client.clone(),
        MirrorConfig::new(DRIVER),
    ));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run_mirror(mirror.clone(), async {
        let _ = stopped.await;
    }));

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"limits": {EXTENDED: "2"}}}]}});
    v1.create_pod(pod).await;
    eventually("pod trainer running", WAIT, || async {
        v1.phase("trainer").await.as_deref() == Some("Running")
    })
    .await;
    let status = v1.pods().get("trainer").await.unwrap().data["status"].clone();
    let claim_name = status["extendedResourceClaimStatus"]["resourceClaimName"]
        .as_str()
        .unwrap()
        .to_owned();
    let claim = v1.claims().get(&claim_name).await.unwrap();
    let uid = claim.metadata.uid.clone().unwrap();
    let prepared = v1.agents.cdi_specs();
    assert!(
        prepared.contains(&("node-0".to_owned(), uid.clone())),
        "the agent prepared the scheduler's claim: {prepared:?}"
    );
    eventually("the claim in the ledger", WAIT, || async {
        ledger.allocation(&uid).unwrap().is_some()
    })
    .await;
    let recorded = ledger.allocation(&uid).unwrap().unwrap();
    assert_eq!(recorded.devices.len(), 2);
    assert_eq!(recorded.claim.name, claim_name);
    let _ = stop.send(());
    task.await.unwrap();
    v1.shutdown().await;
}
