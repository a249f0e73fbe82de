//! The 1.34 overlay (`deploy/overlays/kubernetes-1.34`), rendered by `kubectl kustomize`: it
//! validates against the Kubernetes 1.34 and 1.37 schemas (its examples too), runs the node
//! agent in v1 mode and the controller as the mirror, installs no parameter CRDs, and each
//! `ClusterRole` grants exactly the requests its workload makes in that mode: the agent
//! publishing and republishing its slice, preparing a claim and writing its device status, and
//! listing claims for garbage collection; the mirror recording an allocation of the scheduler
//! and its release, explaining an unallocatable claim, reconciling, and cordoning and
//! uncordoning a device (a `DeviceTaintRule` created and deleted, on 1.37).

use std::collections::BTreeSet;
use std::time::Duration;

use std::sync::Arc;

use dra_allocator::ledger::Ledger;
use dra_api::ClusterCordon;
use dra_controller::mirror::cordon::TaintRuleCordon;
use dra_controller::mirror::{run_mirror, Mirror, MirrorConfig};
use dra_sim::cluster::ClusterHandle;
use dra_sim::{ApiOverrides, KubernetesVersion};
use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use serde_json::json;
use testkit::eventually;

use crate::deploy_support::rbac::{device_status_check, granted, lines, Access, RecordingLayer};
use crate::deploy_support::run_flags::RunFlags;
use crate::deploy_support::{kubernetes_validate, render_overlay, Document, Rendered};
use crate::e2e_support::{DRIVER, WAIT};
use crate::v1_support::{h100s, ClusterV1};
use dra_node::local::LocalSettings;
use dra_types::resource_v1::ResourceSlice;

const OVERLAY: &str = "kubernetes-1.34";

fn overlay() -> Option<Rendered> {
    render_overlay(OVERLAY)
}

#[test]
fn overlay_validates_against_the_kubernetes_1_34_and_1_37_schemas() {
    let Some(rendered) = overlay() else {
        return;
    };
    for version in ["1.34.0", "1.37.0"] {
        let Some(validation) = kubernetes_validate(version, &[rendered.file.path().to_owned()])
        else {
            return;
        };
        let report = validation.lines.join("\n");
        assert!(validation.success, "{version}:\n{report}");
        for line in &validation.lines {
            assert!(line.starts_with("INFO"), "{version}: {line}\n{report}");
        }
        let passed = validation
            .lines
            .iter()
            .filter(|l| l.contains(" passed for resource "))
            .count();
        assert_eq!(passed, rendered.documents.len(), "{version}:\n{report}");
    }
}

#[test]
fn overlay_examples_validate_against_the_kubernetes_1_34_and_1_37_schemas() {
    let examples = crate::deploy_support::deploy_dir().join("overlays/kubernetes-1.34/examples");
    let files: Vec<_> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert!(!files.is_empty(), "{}", examples.display());
    for version in ["1.34.0", "1.37.0"] {
        let Some(validation) = kubernetes_validate(version, &files) else {
            return;
        };
        let report = validation.lines.join("\n");
        assert!(validation.success, "{version}:\n{report}");
        let passed = report.matches(" passed for resource ").count();
        let documents: usize = files
            .iter()
            .map(|f| crate::deploy_support::documents(f).len())
            .sum();
        assert_eq!(passed, documents, "{version}:\n{report}");
    }
}

#[test]
fn overlay_runs_the_node_agent_in_v1_mode() {
    let Some(rendered) = overlay() else {
        return;
    };
    let set: DaemonSet = rendered.find("DaemonSet", "dra-ledger-node").parse();
    let pod = set.spec.unwrap().template.spec.unwrap();
    let args = pod.containers[0].args.clone().unwrap();
    let flags = RunFlags::of(&args);
    assert_eq!(flags.value("dra-api"), "v1");
    assert_eq!(flags.value("driver-name"), DRIVER);
    assert_eq!(
        flags.value("kubelet-registry-dir"),
        "/var/lib/kubelet/plugins_registry",
        "where the 1.34 kubelet looks for registration sockets too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_node_cluster_role_grants_exactly_what_the_v1_agent_requests() {
    let Some(rendered) = overlay() else {
        return;
    };
    let role: ClusterRole = rendered.find("ClusterRole", "dra-ledger-node").parse();
    let granted = granted(&role);

    let dir = tempfile::tempdir().unwrap();
    let recorder = RecordingLayer::default();
    let settings = LocalSettings {
        driver_name: DRIVER.into(),
        gc_interval: Duration::from_millis(200),
        inventory_interval: Duration::from_millis(200),
    };
    let agent_client = |cluster: &dra_sim::cluster::ClusterHandle| {
        let mut config = kube::Config::new(cluster.url().parse().unwrap());
        config.default_namespace = "default".into();
        kube::client::ClientBuilder::try_from(config)
            .unwrap()
            .with_layer(&recorder)
            .build()
    };
    let v1 = ClusterV1::start_with(dir.path(), &[h100s(2)], &settings, agent_client).await;
    v1.device_class("gpu", &format!("device.driver == \"{DRIVER}\""))
        .await;

    // Prepare: the claim is read by name.
    let spec =
        json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}});
    v1.claim("a", spec).await;
    let pod = v1.pod("a", "a", "node-0").await;
    v1.allocate(
        "a",
        &[(DRIVER, "node-0", "gpu-0")],
        "node-0",
        json!([]),
        &pod,
    )
    .await;
    eventually("pod a running", WAIT, || async {
        v1.phase("a").await.as_deref() == Some("Running")
    })
    .await;
    // Its device status is written into the claim's status.
    eventually("claim a's device status", WAIT, || async {
        let claim = v1.claims().get("a").await.unwrap();
        claim
            .status
            .is_some_and(|status| !status.devices.is_empty())
    })
    .await;

    // A second slice of the node's pool (left by an earlier agent, say) is deleted; an inventory
    // change replaces the slice that stays.
    let mut stray: ResourceSlice = v1.slices().await.remove(0);
    stray.metadata = kube::api::ObjectMeta {
        name: Some("node-0-stray".into()),
        ..kube::api::ObjectMeta::default()
    };
    Api::<ResourceSlice>::all(v1.client.clone())
        .create(&PostParams::default(), &stray)
        .await
        .unwrap();
    v1.set_inventory("node-0", &h100s(1));
    eventually("one slice with one device", WAIT, || async {
        let slices = v1.slices().await;
        slices.len() == 1 && slices[0].spec.devices.len() == 1
    })
    .await;

    // Garbage collection lists the claims on its interval while claim a is prepared.
    eventually("a claim list by the agent", WAIT, || async {
        recorder
            .accesses()
            .iter()
            .any(|a| a.resource == "resourceclaims" && a.verb == "list")
    })
    .await;
    v1.shutdown().await;

    let mut observed = recorder.accesses();
    // A status write of the agent changes its own driver's `status.devices` entries only
    // (`dra_node::v1::status`), which a 1.36+ API server authorizes once more.
    let checks: Vec<Access> = observed
        .iter()
        .filter_map(|access| device_status_check(access, DRIVER))
        .collect();
    assert!(!checks.is_empty(), "no status write in {observed:?}");
    observed.extend(checks);
    // Discovery (`--dra-api auto` in the agents here) is granted to every authenticated user by
    // the `system:discovery` ClusterRole; nothing else may be outside the resource API.
    let other: BTreeSet<String> = recorder.other();
    assert!(
        other.iter().all(|path| path == "/apis" || path == "/api"),
        "{other:?}"
    );
    let denied: Vec<_> = observed.difference(&granted).collect();
    assert!(denied.is_empty(), "not allowed:\n{}", lines(denied));
    let unused: Vec<_> = granted.difference(&observed).collect();
    assert!(unused.is_empty(), "never requested:\n{}", lines(unused));
}

#[test]
fn overlay_runs_the_controller_as_the_mirror_without_the_parameter_crds() {
    let Some(rendered) = overlay() else {
        return;
    };
    let set: StatefulSet = rendered.find("StatefulSet", "dra-ledger").parse();
    let pod = set.spec.unwrap().template.spec.unwrap();
    let flags = RunFlags::of(&pod.containers[0].args.clone().unwrap());
    assert_eq!(flags.value("dra-api"), "v1");
    assert_eq!(
        flags.value("leader-elect"),
        "true",
        "still a leader and a standby"
    );
    let kinds: Vec<&str> = rendered.documents.iter().map(Document::kind).collect();
    assert!(!kinds.contains(&"CustomResourceDefinition"), "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "DeviceClass").count(),
        4,
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_controller_cluster_role_grants_exactly_what_the_mirror_requests() {
    let Some(rendered) = overlay() else {
        return;
    };
    let role: ClusterRole = rendered.find("ClusterRole", "dra-ledger").parse();
    let granted = granted(&role);

    let dir = tempfile::tempdir().unwrap();
    let settings = LocalSettings {
        driver_name: DRIVER.into(),
        gc_interval: Duration::from_secs(60),
        inventory_interval: Duration::from_secs(60),
    };
    // 1.37, where cordon writes a DeviceTaintRule.
    let v1 = ClusterV1::start_release(
        dir.path(),
        &[h100s(2)],
        (KubernetesVersion::V1_37, ApiOverrides::default()),
        &settings,
        ClusterHandle::kube_client,
    )
    .await;
    v1.overlay_device_classes().await;
    let recorder = RecordingLayer::default();
    let mut config = kube::Config::new(v1.cluster.url().parse().unwrap());
    config.default_namespace = "default".into();
    let client = kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&recorder)
        .build();
    let ledger = Ledger::open(dir.path().join("ledger.redb"), DRIVER).unwrap();
    let mirror_config = MirrorConfig {
        explain_after: Duration::from_millis(200),
        explain_interval: Duration::from_millis(100),
        ..MirrorConfig::new(DRIVER)
    };
    let cordon = TaintRuleCordon::new(client.clone(), DRIVER);
    let mirror = Arc::new(Mirror::new(ledger.clone(), client, mirror_config));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run_mirror(mirror.clone(), async {
        let _ = stopped.await;
    }));
    tokio::time::timeout(WAIT, mirror.readiness().wait())
        .await
        .expect("the mirror is ready");

    // An allocation of the scheduler recorded, then released with its pod.
    v1.template(
        "one",
        json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}),
    )
    .await;
    v1.pod_from_template("a", "one").await;
    let uid = v1.claim_of("a").await.metadata.uid.unwrap();
    eventually("the allocation in the ledger", WAIT, || async {
        ledger.allocation(&uid).unwrap().is_some()
    })
    .await;
    v1.pods()
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the allocation released", WAIT, || async {
        ledger.allocation(&uid).unwrap().is_none()
    })
    .await;
    // A claim nothing can satisfy is explained; a reconcile lists the claims again.
    let spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": format!("l40s.{DRIVER}")}}]}});
    v1.claim("l40s", spec).await;
    eventually("the NotAllocated event", WAIT, || async {
        recorder
            .accesses()
            .iter()
            .any(|a| a.resource == "events" && a.verb == "create")
    })
    .await;
    mirror.reconcile_now().await.unwrap();
    // Cordon and uncordon: a DeviceTaintRule created and deleted.
    cordon.set("node-0", "gpu-1", true).await.unwrap();
    cordon.set("node-0", "gpu-1", false).await.unwrap();
    let _ = stop.send(());
    task.await.unwrap();
    v1.shutdown().await;

    let observed = recorder.accesses();
    // API discovery (which version serves DeviceTaintRule) needs no rule of ours: the
    // system:discovery role grants it to every authenticated user.
    let other: BTreeSet<String> = recorder
        .other()
        .into_iter()
        .filter(|path| {
            !matches!(
                path.as_str(),
                "/apis/resource.k8s.io/v1" | "/apis/resource.k8s.io/v1beta2"
            )
        })
        .collect();
    assert!(other.is_empty(), "non-resource requests: {other:?}");
    let denied: Vec<_> = observed.difference(&granted).collect();
    assert!(denied.is_empty(), "not allowed:\n{}", lines(denied));
    let unused: Vec<_> = granted.difference(&observed).collect();
    assert!(unused.is_empty(), "never requested:\n{}", lines(unused));
}
