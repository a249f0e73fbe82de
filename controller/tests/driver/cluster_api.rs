//! The framework's `KubeApi` against the simulated API server: a scheduling-context report
//! written from a stale copy is told apart from a real failure, so that the controller retries it
//! quietly instead of warning.

use dra_framework::{status_patch, ClaimStatusEntry, ClusterApi, KubeApi, KubeCallErrorKind};
use dra_sim::cluster::{start_cluster, ClusterConfig};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, PodSchedulingContextSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::PostParams;
use kube::Api;

fn entry(unsuitable: &[&str]) -> ClaimStatusEntry {
    ClaimStatusEntry {
        name: "gpu".into(),
        unsuitable_nodes: unsuitable.iter().map(|n| (*n).to_owned()).collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_from_a_stale_context_is_a_conflict_and_a_fresh_one_is_written() {
    let cluster = start_cluster(ClusterConfig::default())
        .await
        .expect("cluster starts");
    let client = cluster.kube_client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    // Scheduled by no one, so that only this test writes its context.
    let pod = pods
        .create(
            &PostParams::default(),
            &Pod {
                metadata: ObjectMeta {
                    name: Some("p".into()),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec {
                    scheduler_name: Some("elsewhere".into()),
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some("registry.k8s.io/pause:3.9".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
                status: None,
            },
        )
        .await
        .unwrap();
    let contexts: Api<PodSchedulingContext> = Api::default_namespaced(client.clone());
    let created = contexts
        .create(
            &PostParams::default(),
            &PodSchedulingContext {
                metadata: ObjectMeta {
                    name: Some("p".into()),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Pod".into(),
                        name: "p".into(),
                        uid: pod.metadata.uid.clone().unwrap(),
                        controller: Some(true),
                        ..OwnerReference::default()
                    }]),
                    ..ObjectMeta::default()
                },
                spec: PodSchedulingContextSpec {
                    potential_nodes: Some(vec!["node-0".into(), "node-1".into()]),
                    selected_node: None,
                },
                status: None,
            },
        )
        .await
        .unwrap();
    let api = KubeApi::new(client, "gpu.dra-ledger.io");

    let patch = status_patch(&created, &[entry(&["node-0"])]).expect("a change");
    let written = api
        .patch_scheduling_context_status("default", "p", &patch)
        .await
        .expect("a report from the current copy is written");
    let claims = written.status.unwrap().resource_claims.unwrap();
    assert_eq!(
        claims[0].unsuitable_nodes.as_deref(),
        Some(&["node-0".to_owned()][..])
    );

    let stale = status_patch(&created, &[entry(&["node-1"])]).expect("a change");
    let error = api
        .patch_scheduling_context_status("default", "p", &stale)
        .await
        .expect_err("the copy is stale");
    assert_eq!(error.kind, KubeCallErrorKind::Conflict, "{}", error.message);

    let now = contexts.get("p").await.unwrap();
    let claims = now.status.unwrap().resource_claims.unwrap();
    assert_eq!(
        claims[0].unsuitable_nodes.as_deref(),
        Some(&["node-0".to_owned()][..]),
        "the stale report changed nothing"
    );
    cluster.shutdown().await;
}
