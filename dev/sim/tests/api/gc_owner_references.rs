//! The garbage collector against the simulated API server: dependents of a deleted owner are
//! deleted (background), foreground deletion waits for blocking dependents, orphan deletion keeps
//! them, dependents with a remaining owner only lose the dangling reference, and an object with a
//! finalizer stays with a deletionTimestamp until the finalizer is removed.

use std::time::Duration;
use testkit::eventually;

use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use k8s_openapi::api::core::v1::{
    ClaimSource, ConfigMap, Container, Node, Pod, PodResourceClaim, PodSpec,
};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClaimTemplateSpec, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

/// How long a test waits for the garbage collector.
const WAIT: Duration = Duration::from_secs(20);

const FINALIZER: &str = "gpu.dra-ledger.io/deletion-protection";

async fn cluster() -> ClusterHandle {
    start_cluster(ClusterConfig {
        nodes: 1,
        resource_class: Some("gpu".into()),
        ..ClusterConfig::default()
    })
    .await
    .expect("cluster starts")
}

/// A pod that no scheduler picks up, so that it stays unbound and is deleted at once.
async fn unscheduled_pod(
    client: &Client,
    name: &str,
    claims: Option<Vec<PodResourceClaim>>,
) -> Pod {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some("not-simulated".into()),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            resource_claims: claims,
            ..PodSpec::default()
        }),
        status: None,
    };
    Api::<Pod>::default_namespaced(client.clone())
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created")
}

fn owned_by(pod: &Pod, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone().unwrap(),
        uid: pod.metadata.uid.clone().unwrap(),
        controller: None,
        block_owner_deletion: Some(block),
    }
}

async fn config_map(client: &Client, name: &str, owners: Vec<OwnerReference>) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::default_namespaced(client.clone())
        .create(&PostParams::default(), &cm)
        .await
        .expect("configmap created");
}

async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.expect("read").is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_deletes_its_template_claim_once_the_finalizer_goes() {
    let cluster = cluster().await;
    let client = cluster.kube_client();
    let templates: Api<ResourceClaimTemplate> = Api::default_namespaced(client.clone());
    let template = ResourceClaimTemplate {
        metadata: ObjectMeta {
            name: Some("gpu-template".into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimTemplateSpec {
            metadata: None,
            spec: ResourceClaimSpec {
                resource_class_name: "gpu".into(),
                allocation_mode: None,
                parameters_ref: None,
            },
        },
    };
    templates
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
    let claim_entry = PodResourceClaim {
        name: "gpu".into(),
        source: Some(ClaimSource {
            resource_claim_template_name: Some("gpu-template".into()),
            resource_claim_name: None,
        }),
    };
    unscheduled_pod(&client, "owner", Some(vec![claim_entry])).await;
    let claims: Api<ResourceClaim> = Api::default_namespaced(client.clone());
    eventually("the claim is generated", WAIT, || async {
        claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 1
    })
    .await;
    let claim = claims
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let claim_name = claim.metadata.name.clone().unwrap();
    // The driver's finalizer, as an allocation would leave it.
    let add = serde_json::json!({ "metadata": { "finalizers": [FINALIZER] } });
    claims
        .patch(&claim_name, &PatchParams::default(), &Patch::Merge(&add))
        .await
        .unwrap();

    Api::<Pod>::default_namespaced(client.clone())
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the claim is marked for deletion", WAIT, || async {
        claims
            .get(&claim_name)
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !gone(&claims, &claim_name).await,
        "a claim with a finalizer stays until the finalizer goes"
    );

    let remove = serde_json::json!({ "metadata": { "finalizers": null } });
    claims
        .patch(&claim_name, &PatchParams::default(), &Patch::Merge(&remove))
        .await
        .unwrap();
    eventually("the claim is gone", WAIT, || async {
        gone(&claims, &claim_name).await
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_deletes_its_scheduling_context() {
    let cluster = cluster().await;
    let client = cluster.kube_client();
    let pod = unscheduled_pod(&client, "waiting", None).await;
    let contexts: Api<PodSchedulingContext> = Api::default_namespaced(client.clone());
    let ctx = PodSchedulingContext {
        metadata: ObjectMeta {
            name: Some("waiting".into()),
            owner_references: Some(vec![OwnerReference {
                controller: Some(true),
                ..owned_by(&pod, true)
            }]),
            ..ObjectMeta::default()
        },
        ..PodSchedulingContext::default()
    };
    contexts.create(&PostParams::default(), &ctx).await.unwrap();
    Api::<Pod>::default_namespaced(client.clone())
        .delete("waiting", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the context is gone", WAIT, || async {
        gone(&contexts, "waiting").await
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependent_with_another_owner_only_loses_the_dangling_reference() {
    let cluster = cluster().await;
    let client = cluster.kube_client();
    let first = unscheduled_pod(&client, "first", None).await;
    let second = unscheduled_pod(&client, "second", None).await;
    config_map(
        &client,
        "shared",
        vec![owned_by(&first, false), owned_by(&second, false)],
    )
    .await;
    Api::<Pod>::default_namespaced(client.clone())
        .delete("first", &DeleteParams::default())
        .await
        .unwrap();
    let maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    eventually(
        "the reference to the deleted owner is dropped",
        WAIT,
        || async {
            maps.get("shared")
                .await
                .unwrap()
                .metadata
                .owner_references
                .unwrap_or_default()
                .len()
                == 1
        },
    )
    .await;
    let owners = maps
        .get("shared")
        .await
        .unwrap()
        .metadata
        .owner_references
        .unwrap();
    assert_eq!(owners[0].uid, second.metadata.uid.clone().unwrap());
    cluster.shutdown().await;
}

/// An unscheduled pod `parent` and a `ConfigMap` `child` that it owns with a blocking
/// reference; the APIs of both.
async fn parent_with_child(client: &Client) -> (Api<Pod>, Api<ConfigMap>) {
    let owner = unscheduled_pod(client, "parent", None).await;
    config_map(client, "child", vec![owned_by(&owner, true)]).await;
    (
        Api::default_namespaced(client.clone()),
        Api::default_namespaced(client.clone()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_keeps_the_owner_until_blocking_dependents_are_gone() {
    let cluster = cluster().await;
    let (pods, maps) = parent_with_child(&cluster.kube_client()).await;
    let hold = serde_json::json!({ "metadata": { "finalizers": ["example.com/hold"] } });
    maps.patch("child", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    pods.delete("parent", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually("the dependent is being deleted", WAIT, || async {
        maps.get("child")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let parent = pods
        .get("parent")
        .await
        .expect("the owner waits for its blocking dependent");
    assert!(parent.metadata.deletion_timestamp.is_some());

    let release = serde_json::json!({ "metadata": { "finalizers": null } });
    maps.patch("child", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    eventually("owner and dependent are gone", WAIT, || async {
        gone(&maps, "child").await && gone(&pods, "parent").await
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let cluster = cluster().await;
    let (pods, maps) = parent_with_child(&cluster.kube_client()).await;
    pods.delete("parent", &DeleteParams::orphan())
        .await
        .unwrap();
    eventually("the owner is gone", WAIT, || async {
        gone(&pods, "parent").await
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let child = maps
        .get("child")
        .await
        .expect("an orphaned dependent stays");
    assert!(child
        .metadata
        .owner_references
        .unwrap_or_default()
        .is_empty());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_node_deletes_the_resource_slice_it_owns() {
    let cluster = start_cluster(ClusterConfig {
        nodes: 2,
        devices_per_node: 2,
        ..ClusterConfig::default()
    })
    .await
    .expect("cluster starts");
    let client = cluster.kube_client();
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    assert_eq!(
        slices
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    Api::<Node>::all(client.clone())
        .delete("node-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the slice of node-0 is gone", WAIT, || async {
        gone(&slices, "node-0-gpu.dra-ledger.io").await
    })
    .await;
    assert!(!gone(&slices, "node-1-gpu.dra-ledger.io").await);
    cluster.shutdown().await;
}
