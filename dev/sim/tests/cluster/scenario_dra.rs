//! Scenarios of the `v1alpha2` DRA protocol against the simulated cluster: a scripted driver inside
//! the test plays the DRA driver's part over HTTP (unsuitable nodes, allocation on the selected
//! node with a finalizer, deallocation on request or deletion) while the simulator's scheduler,
//! resourceclaim controller, garbage collector and kubelet do theirs.

use std::sync::Arc;
use std::time::Duration;

use crate::scenario_driver::{Driver, Record, Script, CLASS, FINALIZER};
use crate::support::{batch_size, create_pod, create_v1alpha2_claim, get_pod, node_of, phase};
use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use dra_sim::server::Faults;
use k8s_openapi::api::core::v1::{ClaimSource, Container, Event, Pod, PodResourceClaim, PodSpec};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClaimTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use testkit::eventually;

const RUN_SECONDS: &str = "sim.dra-ledger.io/run-seconds";

async fn cluster(nodes: usize) -> ClusterHandle {
    start_cluster(ClusterConfig {
        nodes,
        devices_per_node: 2,
        resource_class: Some(CLASS.into()),
        ..ClusterConfig::default()
    })
    .await
    .expect("cluster starts")
}

async fn create_template(client: &Client, name: &str) {
    let template = ResourceClaimTemplate {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimTemplateSpec {
            metadata: None,
            spec: ResourceClaimSpec {
                resource_class_name: CLASS.into(),
                allocation_mode: None,
                parameters_ref: None,
            },
        },
    };
    Api::<ResourceClaimTemplate>::default_namespaced(client.clone())
        .create(&PostParams::default(), &template)
        .await
        .expect("template created");
}

/// A pod using the given `(pod claim name, source)` entries; `template:x` or `claim:x`.
fn pod(name: &str, claims: &[(&str, &str)], run_seconds: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: run_seconds.map(|s| [(RUN_SECONDS.to_owned(), s.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            resource_claims: Some(
                claims
                    .iter()
                    .map(|(pod_claim, source)| {
                        let (kind, target) = source.split_once(':').expect("kind:name");
                        PodResourceClaim {
                            name: (*pod_claim).into(),
                            source: Some(ClaimSource {
                                resource_claim_name: (kind == "claim").then(|| target.into()),
                                resource_claim_template_name: (kind == "template")
                                    .then(|| target.into()),
                            }),
                        }
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }),
        status: None,
    }
}

async fn claims(client: &Client) -> Vec<ResourceClaim> {
    Api::<ResourceClaim>::default_namespaced(client.clone())
        .list(&ListParams::default())
        .await
        .expect("claims listed")
        .items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_claim_templates_are_scheduled_run_and_release_their_claims() {
    let cluster = cluster(2).await;
    let client = cluster.kube_client();
    let driver = Driver::start(client.clone(), Script::with_capacity(2));
    create_template(&client, "gpu-template").await;
    let names: Vec<String> = (0..6).map(|i| format!("job-{i}")).collect();
    for name in &names {
        create_pod(
            &client,
            &pod(name, &[("gpu", "template:gpu-template")], Some("0.3")),
        )
        .await;
    }

    eventually("every pod succeeds", Duration::from_secs(60), || async {
        let pods = Api::<Pod>::default_namespaced(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        pods.len() == names.len() && pods.iter().all(|p| phase(p) == "Succeeded")
    })
    .await;
    eventually(
        "the claims of finished pods are deleted",
        Duration::from_secs(30),
        || async { claims(&client).await.is_empty() },
    )
    .await;
    let contexts = Api::<PodSchedulingContext>::default_namespaced(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        contexts.items.is_empty(),
        "scheduling contexts are deleted after binding"
    );

    let log = driver.log();
    let allocations: Vec<_> = log
        .iter()
        .filter_map(|r| match r {
            Record::Allocated { pod, node, .. } => Some((pod.clone(), node.clone())),
            Record::Deallocated { .. } => None,
        })
        .collect();
    assert_eq!(
        allocations.len(),
        names.len(),
        "one allocation per pod: {log:?}"
    );
    for (pod_name, node) in &allocations {
        let pod = get_pod(
            &client,
            pod_name
                .as_deref()
                .expect("delayed allocation names the pod"),
        )
        .await;
        assert_eq!(
            node_of(&pod),
            Some(node.as_str()),
            "pod bound where its claim was allocated"
        );
    }
    let deallocations: Vec<_> = log
        .iter()
        .filter(|r| matches!(r, Record::Deallocated { .. }))
        .collect();
    assert_eq!(deallocations.len(), names.len());
    for record in deallocations {
        let Record::Deallocated {
            reserved_for_empty, ..
        } = record
        else {
            unreachable!()
        };
        assert!(
            reserved_for_empty,
            "a claim is deallocated only once nobody uses it: {record:?}"
        );
    }
    assert!(
        driver.max_in_use() <= 2,
        "never more claims on a node than it has devices"
    );
    driver.stop();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_of_pods_with_claims_is_allocated_bound_and_run() {
    let cluster = cluster(10).await;
    let client = cluster.kube_client();
    let count = batch_size(100);
    let driver = Driver::start(client.clone(), Script::with_capacity(count));
    create_template(&client, "gpu-template").await;
    let started = std::time::Instant::now();
    for i in 0..count {
        let name = format!("batch-{i}");
        create_pod(
            &client,
            &pod(&name, &[("gpu", "template:gpu-template")], None),
        )
        .await;
    }
    let created = started.elapsed();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    eventually("every pod runs", Duration::from_secs(300), || async {
        let list = pods.list(&ListParams::default()).await.unwrap();
        list.items.iter().filter(|p| phase(p) == "Running").count() == count
    })
    .await;
    let elapsed = started.elapsed();
    eprintln!("{count} pods with claims created in {created:?}, all running after {elapsed:?}");
    let allocations = driver
        .log()
        .iter()
        .filter(|r| matches!(r, Record::Allocated { .. }))
        .count();
    assert_eq!(allocations, count, "exactly one allocation per pod");
    driver.stop();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_flow_survives_conflicts_server_errors_and_watch_disconnects() {
    let cluster = cluster(2).await;
    let client = cluster.kube_client();
    create_template(&client, "gpu-template").await;
    let names: Vec<String> = (0..6).map(|i| format!("flaky-{i}")).collect();
    for name in &names {
        create_pod(
            &client,
            &pod(name, &[("gpu", "template:gpu-template")], Some("0.2")),
        )
        .await;
    }
    cluster.server().set_faults(
        Faults::seeded(7)
            .conflicts(0.15)
            .errors(0.1)
            .watch_disconnects(Duration::from_secs(2)),
    );
    let driver = Driver::start(client.clone(), Script::with_capacity(2));
    eventually(
        "every pod succeeds despite faults",
        Duration::from_secs(90),
        || async {
            let Ok(pods) = Api::<Pod>::default_namespaced(client.clone())
                .list(&ListParams::default())
                .await
            else {
                return false;
            };
            pods.items.len() == names.len() && pods.items.iter().all(|p| phase(p) == "Succeeded")
        },
    )
    .await;
    eventually(
        "the claims of finished pods are deleted",
        Duration::from_secs(60),
        || async {
            Api::<ResourceClaim>::default_namespaced(client.clone())
                .list(&ListParams::default())
                .await
                .is_ok_and(|l| l.items.is_empty())
        },
    )
    .await;
    let stats = cluster.server().fault_stats();
    assert!(
        stats.conflicts > 0 && stats.errors > 0,
        "faults were injected: {stats:?}"
    );
    assert!(driver.max_in_use() <= 2);
    driver.stop();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_claim_belongs_to_its_pod_and_goes_with_it() {
    let cluster = cluster(2).await;
    let client = cluster.kube_client();
    let driver = Driver::start(client.clone(), Script::with_capacity(2));
    create_template(&client, "gpu-template").await;
    create_pod(
        &client,
        &pod("trainer", &[("gpu", "template:gpu-template")], None),
    )
    .await;
    eventually("the pod runs", Duration::from_secs(30), || async {
        phase(&get_pod(&client, "trainer").await) == "Running"
    })
    .await;

    let pod = get_pod(&client, "trainer").await;
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].name, "gpu");
    let claim_name = statuses[0]
        .resource_claim_name
        .clone()
        .expect("claim name recorded");
    assert!(
        claim_name.starts_with("trainer-gpu-"),
        "generated name {claim_name}"
    );
    let claim = Api::<ResourceClaim>::default_namespaced(client.clone())
        .get(&claim_name)
        .await
        .unwrap();
    assert_eq!(
        claim.metadata.annotations.unwrap()["resource.kubernetes.io/pod-claim-name"],
        "gpu"
    );
    let owner = &claim.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Pod", pod.metadata.uid.as_deref().unwrap())
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    let status = claim.status.unwrap();
    let reserved = status.reserved_for.unwrap();
    assert_eq!(reserved.len(), 1);
    assert_eq!(reserved[0].uid, pod.metadata.uid.clone().unwrap());
    assert!(claim
        .metadata
        .finalizers
        .unwrap()
        .contains(&FINALIZER.to_owned()));

    Api::<Pod>::default_namespaced(client.clone())
        .delete("trainer", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the pod and its claim are gone",
        Duration::from_secs(30),
        || async {
            let pod_gone = Api::<Pod>::default_namespaced(client.clone())
                .get_opt("trainer")
                .await
                .unwrap()
                .is_none();
            pod_gone && claims(&client).await.is_empty()
        },
    )
    .await;
    assert!(driver
        .log()
        .iter()
        .any(|r| matches!(r, Record::Deallocated { claim, .. } if *claim == claim_name)));
    driver.stop();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsuitable_selected_node_clears_selection_before_deallocation() {
    let cluster = cluster(2).await;
    let client = cluster.kube_client();
    // Allocating claim "b" on the first node selected fails once; from then on the driver reports
    // that node unsuitable for it, while claim "a" is already allocated there.
    let driver = Driver::start(
        client.clone(),
        Script::with_capacity(4).failing_once_on_the_first_node("b"),
    );
    create_template(&client, "gpu-template").await;
    create_pod(
        &client,
        &pod(
            "pair",
            &[
                ("a", "template:gpu-template"),
                ("b", "template:gpu-template"),
            ],
            None,
        ),
    )
    .await;
    eventually("the pod runs", Duration::from_secs(30), || async {
        phase(&get_pod(&client, "pair").await) == "Running"
    })
    .await;

    let log = driver.log();
    let first = log
        .iter()
        .find_map(|r| {
            if let Record::Allocated { node, .. } = r {
                Some(node.clone())
            } else {
                None
            }
        })
        .expect("an allocation");
    let other = if first == "node-0" {
        "node-1"
    } else {
        "node-0"
    };
    let pod = get_pod(&client, "pair").await;
    assert_eq!(
        node_of(&pod),
        Some(other),
        "the pod moved to the node that fits both claims"
    );
    let deallocation = log
        .iter()
        .find(|r| {
            matches!(
                r,
                Record::Deallocated {
                    deleting: false,
                    ..
                }
            )
        })
        .unwrap_or_else(|| panic!("claim a was deallocated on request: {log:?}"));
    let Record::Deallocated {
        selected_node_at_request,
        ..
    } = deallocation
    else {
        unreachable!()
    };
    assert_eq!(
        *selected_node_at_request, None,
        "selectedNode was cleared before deallocation was requested"
    );
    for claim in claims(&client).await {
        let node = driver.node_of(claim.metadata.uid.as_deref().unwrap());
        assert_eq!(
            node.as_deref(),
            Some(other),
            "both claims end up on the other node"
        );
    }
    let on_first = log
        .iter()
        .filter(|r| matches!(r, Record::Allocated { node, .. } if *node == first))
        .count();
    assert_eq!(
        on_first, 1,
        "nothing was reallocated on the old node: {log:?}"
    );
    driver.stop();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_with_immediate_claim_waits_for_allocation_and_lands_on_its_node() {
    let cluster = cluster(3).await;
    let client = cluster.kube_client();
    let script = Arc::new(Script::with_capacity(2).immediate_paused());
    let driver = Driver::start_shared(client.clone(), script.clone());
    create_v1alpha2_claim(&client, "shared-gpu", CLASS, Some("Immediate")).await;
    create_pod(&client, &pod("user", &[("gpu", "claim:shared-gpu")], None)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        node_of(&get_pod(&client, "user").await),
        None,
        "no binding before the claim is allocated"
    );
    let waiting = get_pod(&client, "user").await;
    let condition = waiting
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "PodScheduled"))
        .expect("the scheduler says why the pod waits");
    assert_eq!(condition.status, "False");
    assert_eq!(
        condition.message.as_deref(),
        Some("unallocated immediate resourceclaim shared-gpu")
    );

    script.resume_immediate();
    eventually("the pod runs", Duration::from_secs(30), || async {
        phase(&get_pod(&client, "user").await) == "Running"
    })
    .await;
    let claim = Api::<ResourceClaim>::default_namespaced(client.clone())
        .get("shared-gpu")
        .await
        .unwrap();
    let allocated_on = driver
        .node_of(claim.metadata.uid.as_deref().unwrap())
        .expect("claim allocated");
    assert_eq!(
        allocated_on, "node-2",
        "the scripted driver picks the last node for immediate claims"
    );
    assert_eq!(
        node_of(&get_pod(&client, "user").await),
        Some(allocated_on.as_str())
    );
    let reserved = claim.status.unwrap().reserved_for.unwrap();
    assert_eq!(
        reserved.len(),
        1,
        "the scheduler reserved the immediate claim for the pod"
    );
    driver.stop();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_claim_does_not_exist_waits_without_events_until_the_claim_appears() {
    // The scheduler's `PreEnqueue` keeps such a pod out of the queue: no cycle, so neither a
    // `FailedScheduling` event nor a `PodScheduled` condition, as kube-scheduler 1.30.
    let cluster = cluster(2).await;
    let client = cluster.kube_client();
    let driver = Driver::start(client.clone(), Script::with_capacity(2));
    create_pod(&client, &pod("late", &[("gpu", "claim:late-gpu")], None)).await;
    // Longer than the scheduler's recheck of a waiting pod (1 s): it has looked more than once.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let events: Vec<String> = Api::<Event>::default_namespaced(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("late"))
        .map(|e| format!("{:?}: {:?}", e.reason, e.message))
        .collect();
    assert_eq!(events, Vec::<String>::new(), "events about the gated pod");
    let waiting = get_pod(&client, "late").await;
    let conditions = waiting
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(
        conditions.iter().all(|c| c.type_ != "PodScheduled"),
        "{conditions:?}"
    );

    create_v1alpha2_claim(&client, "late-gpu", CLASS, None).await;
    eventually("the pod runs", Duration::from_secs(30), || async {
        phase(&get_pod(&client, "late").await) == "Running"
    })
    .await;
    driver.stop();
    cluster.shutdown().await;
}
