//! The scheduler, kubelet and resourceclaim controller on pods without DRA claims, against the
//! simulated API server: pods of the default scheduler are bound to schedulable nodes, pods of
//! other schedulers are left alone, the kubelet runs and finishes pods and completes graceful
//! deletion, and a large batch is scheduled quickly.

use std::time::{Duration, Instant};
use testkit::eventually;

use crate::support::{batch_size, create_pod, get_pod, node_of, phase};

use dra_sim::actors::{Actors, ActorsConfig};
use dra_sim::cluster::{populate, start_cluster, ClusterConfig, ClusterHandle};
use dra_sim::server::SimServer;
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::Api;

async fn cluster(nodes: usize) -> ClusterHandle {
    start_cluster(ClusterConfig {
        nodes,
        ..ClusterConfig::default()
    })
    .await
    .expect("cluster starts")
}

fn pod(name: &str, scheduler: Option<&str>, run_seconds: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: run_seconds
                .map(|s| [("sim.dra-ledger.io/run-seconds".to_owned(), s.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            scheduler_name: scheduler.map(Into::into),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_without_claims_is_bound_runs_and_succeeds_after_its_run_time() {
    let cluster = cluster(2).await;
    let client = cluster.kube_client();
    let started = Instant::now();
    create_pod(&client, &pod("short", None, Some("0.5"))).await;
    eventually("the pod runs", Duration::from_secs(10), || async {
        phase(&get_pod(&client, "short").await) == "Running"
    })
    .await;
    let running = get_pod(&client, "short").await;
    assert!(cluster
        .node_names()
        .iter()
        .any(|n| Some(n.as_str()) == node_of(&running)));
    assert!(running.status.as_ref().unwrap().start_time.is_some());
    eventually("the pod succeeds", Duration::from_secs(10), || async {
        phase(&get_pod(&client, "short").await) == "Succeeded"
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the pod ran for its run time"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_other_schedulers_and_cordoned_nodes_are_left_alone() {
    // node-0 is cordoned before the actors start, so the scheduler's first node list already
    // shows it unschedulable and the outcome does not depend on watch propagation.
    let config = ClusterConfig {
        nodes: 2,
        ..ClusterConfig::default()
    };
    let server = SimServer::start(config.server.clone())
        .await
        .expect("server starts");
    let client = server.kube_client().expect("client");
    populate(&client, &config).await.expect("nodes created");
    let nodes: Api<Node> = Api::all(client.clone());
    let cordon = serde_json::json!({ "spec": { "unschedulable": true } });
    nodes
        .patch("node-0", &PatchParams::default(), &Patch::Merge(&cordon))
        .await
        .unwrap();
    let actors = Actors::start(client.clone(), &config.actors)
        .await
        .expect("actors start");
    create_pod(&client, &pod("foreign", Some("volcano"), None)).await;
    for i in 0..4 {
        create_pod(
            &client,
            &pod(&format!("local-{i}"), Some("default-scheduler"), None),
        )
        .await;
    }
    eventually(
        "the default scheduler's pods run",
        Duration::from_secs(10),
        || async {
            let mut all = true;
            for i in 0..4 {
                all &= phase(&get_pod(&client, &format!("local-{i}")).await) == "Running";
            }
            all
        },
    )
    .await;
    for i in 0..4 {
        let pod = get_pod(&client, &format!("local-{i}")).await;
        assert_eq!(
            node_of(&pod),
            Some("node-1"),
            "the cordoned node gets no pods"
        );
    }
    let foreign = get_pod(&client, "foreign").await;
    assert_eq!(
        node_of(&foreign),
        None,
        "another scheduler's pod is not bound"
    );
    assert_ne!(phase(&foreign), "Running");
    actors.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_completes_graceful_deletion_of_bound_pod() {
    let cluster = cluster(1).await;
    let client = cluster.kube_client();
    create_pod(&client, &pod("server", None, None)).await;
    eventually("the pod runs", Duration::from_secs(10), || async {
        phase(&get_pod(&client, "server").await) == "Running"
    })
    .await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.delete("server", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the pod is gone", Duration::from_secs(10), || async {
        pods.get_opt("server").await.unwrap().is_none()
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_kubelets_bound_pods_stay_pending_and_deleted_ones_terminating() {
    let cluster = start_cluster(ClusterConfig {
        nodes: 1,
        actors: ActorsConfig {
            kubelets: false,
            ..ActorsConfig::default()
        },
        ..ClusterConfig::default()
    })
    .await
    .expect("cluster starts");
    let client = cluster.kube_client();
    create_pod(&client, &pod("first", None, Some("0"))).await;
    eventually(
        "the first pod is bound",
        Duration::from_secs(10),
        || async { node_of(&get_pod(&client, "first").await).is_some() },
    )
    .await;
    // A pod bound later: by then a kubelet would long have started the first one.
    create_pod(&client, &pod("second", None, None)).await;
    eventually(
        "the second pod is bound",
        Duration::from_secs(10),
        || async { node_of(&get_pod(&client, "second").await).is_some() },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let first = get_pod(&client, "first").await;
    assert_eq!(phase(&first), "Pending", "{:?}", first.status);
    assert!(first.status.unwrap().start_time.is_none());

    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.delete("second", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = pods.get_opt("second").await.unwrap().expect("still there");
    assert!(second.metadata.deletion_timestamp.is_some());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_of_pods_is_scheduled_and_spread_over_nodes() {
    let cluster = cluster(10).await;
    let client = cluster.kube_client();
    let count = batch_size(300);
    let started = Instant::now();
    for i in 0..count {
        create_pod(&client, &pod(&format!("batch-{i}"), None, None)).await;
    }
    let created = started.elapsed();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    eventually("every pod runs", Duration::from_secs(120), || async {
        let list = pods.list(&ListParams::default()).await.unwrap();
        list.items.iter().filter(|p| phase(p) == "Running").count() == count
    })
    .await;
    let elapsed = started.elapsed();
    eprintln!("{count} pods created in {created:?}, all running after {elapsed:?}");
    let list = pods.list(&ListParams::default()).await.unwrap();
    let mut per_node = std::collections::BTreeMap::new();
    for pod in &list.items {
        *per_node
            .entry(node_of(pod).unwrap().to_owned())
            .or_insert(0) += 1;
    }
    assert_eq!(per_node.len(), 10, "every node got pods: {per_node:?}");
    assert!(
        elapsed < Duration::from_secs(60),
        "scheduling {count} pods took {elapsed:?}"
    );
    cluster.shutdown().await;
}
