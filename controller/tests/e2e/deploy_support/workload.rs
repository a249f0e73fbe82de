//! The workload of the RBAC test: the controller runs against the simulated cluster with a client
//! that records its requests, while the examples of `deploy/examples/` are applied (the class
//! replaces the fixture's own), an immediate claim is allocated and deleted, claims with invalid
//! or missing class or claim parameters fail repeatedly (their Warning events are created, then
//! patched; the missing ones are looked up with a live GET), the example pod is bound and
//! deleted, and then a pod with two claims (whose unsuitable-node report the scheduler waits for).

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{
    ResourceClaim, ResourceClaimParametersReference, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClass, ResourceClassParametersReference,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::rbac::{Access, RecordingLayer};
use super::{deploy_dir, documents, Document};
use crate::e2e_support::{count, node, Env, Running, WAIT};
use dra_controller::params::{DeviceClaimParameters, DeviceClassParameters, API_GROUP};
use testkit::eventually;

/// Creates the object of `doc` as type `K` in its namespace (or cluster-wide).
async fn create<K>(client: &Client, doc: &Document)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let object: K = doc.parse();
    let namespace = object
        .meta()
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    Api::<K>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("{} {} created: {e}", doc.kind(), doc.name()));
}

async fn create_cluster_scoped<K>(client: &Client, doc: &Document)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    K: Resource<Scope = k8s_openapi::ClusterResourceScope>,
{
    let object: K = doc.parse();
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("{} {} created: {e}", doc.kind(), doc.name()));
}

/// Applies every object of `deploy/examples/<file>`.
async fn apply_example(client: &Client, file: &str) {
    for doc in documents(&deploy_dir().join("examples").join(file)) {
        match doc.kind() {
            "DeviceClassParameters" => {
                create_cluster_scoped::<DeviceClassParameters>(client, &doc).await;
            }
            "ResourceClass" => create_cluster_scoped::<ResourceClass>(client, &doc).await,
            "DeviceClaimParameters" => create::<DeviceClaimParameters>(client, &doc).await,
            "ResourceClaimTemplate" => create::<ResourceClaimTemplate>(client, &doc).await,
            "Pod" => create::<Pod>(client, &doc).await,
            other => panic!("no way to apply a {other} of examples/{file}"),
        }
    }
}

/// An immediate claim of `class` with claim parameters `params`.
fn immediate_claim(name: &str, class: &str, params: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            resource_class_name: class.into(),
            allocation_mode: Some("Immediate".into()),
            parameters_ref: Some(ResourceClaimParametersReference {
                api_group: Some(API_GROUP.into()),
                kind: "DeviceClaimParameters".into(),
                name: params.into(),
            }),
        },
        status: None,
    }
}

/// A client of the in-process cluster of `env` whose requests pass through `recorder`.
fn recording_client(env: &Env, recorder: &RecordingLayer) -> Client {
    let cluster = env.cluster.as_ref().expect("in-process cluster");
    let mut config = kube::Config::new(cluster.url().parse().expect("cluster URL"));
    config.default_namespace = "default".into();
    config.read_timeout = None;
    kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(recorder)
        .build()
}

/// Replaces the fixture's class (same names) with the example class.
async fn use_example_class(client: &Client) {
    Api::<ResourceClass>::all(client.clone())
        .delete("gpu", &DeleteParams::default())
        .await
        .expect("fixture class deleted");
    Api::<DeviceClassParameters>::all(client.clone())
        .delete("gpu-defaults", &DeleteParams::default())
        .await
        .expect("fixture class parameters deleted");
    apply_example(client, "gpu-class.yaml").await;
}

/// Claims that never allocate: invalid claim parameters, missing claim parameters and a class
/// whose parameters are missing. The missing objects are not in the watched copies, so each
/// lookup falls back to a live GET.
async fn create_failing_claims(env: &Env) {
    env.params("broken", count(0)).await;
    let unset_class = ResourceClass {
        metadata: ObjectMeta {
            name: Some("gpu-unset".into()),
            ..ObjectMeta::default()
        },
        driver_name: "gpu.dra-ledger.io".into(),
        parameters_ref: Some(ResourceClassParametersReference {
            api_group: Some(API_GROUP.into()),
            kind: "DeviceClassParameters".into(),
            name: "absent".into(),
            namespace: None,
        }),
        structured_parameters: None,
        suitable_nodes: None,
    };
    Api::<ResourceClass>::all(env.client.clone())
        .create(&PostParams::default(), &unset_class)
        .await
        .expect("class without parameters created");
    let claims = Api::<ResourceClaim>::default_namespaced(env.client.clone());
    for claim in [
        immediate_claim("broken", "gpu", "broken"),
        immediate_claim("no-claim-parameters", "gpu", "absent"),
        immediate_claim("no-class-parameters", "gpu-unset", "two-gpus-same-numa"),
    ] {
        claims
            .create(&PostParams::default(), &claim)
            .await
            .expect("failing claim created");
    }
}

/// Deletes pod `name` and waits until the ledger holds no allocated claim.
async fn delete_pod_until_released(env: &Env, name: &str) {
    Api::<Pod>::default_namespaced(env.client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .expect("pod deleted");
    eventually(&format!("claims of {name} released"), WAIT, || async {
        env.allocated_claims().await.is_empty().then_some(())
    })
    .await;
}

/// Runs the workload of the module docs with the controller's requests recorded; returns the
/// recorder once every access of `granted` was seen or [`WAIT`] passed.
pub async fn run_examples_and_record(granted: &BTreeSet<Access>) -> RecordingLayer {
    let nodes: Vec<_> = (0..2)
        .map(|i| node(&format!("node-{i}"), "H100", "80Gi", &[0, 0, 1, 1]))
        .collect();
    let env = Env::start(&nodes).await;
    let client = env.client.clone();
    use_example_class(&client).await;
    let recorder = RecordingLayer::default();
    let running = Running::start(&recording_client(&env, &recorder), &env.ledger_path(), 2).await;

    apply_example(&client, "gpu-claim.yaml").await;
    let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
    claims
        .create(
            &PostParams::default(),
            &immediate_claim("immediate", "gpu", "two-gpus-same-numa"),
        )
        .await
        .expect("immediate claim created");
    create_failing_claims(&env).await;

    env.wait_bound(&["trainer".to_owned()]).await;
    eventually("immediate claim allocated", WAIT, || async {
        let allocated = env.allocated_claims().await;
        allocated
            .iter()
            .any(|c| c.name == "immediate")
            .then_some(())
    })
    .await;
    let pod_claims = env.claims_of_pod("trainer").await;
    assert_eq!(
        pod_claims["gpus"].data.devices.len(),
        2,
        "the example pod got two devices"
    );

    claims
        .delete("immediate", &DeleteParams::default())
        .await
        .expect("immediate claim deleted");
    delete_pod_until_released(&env, "trainer").await;

    // A pod with two claims: the scheduler waits for the unsuitable-node report of both before
    // it selects a node, so the context status is patched.
    env.pod("pair", &[("first", "two-gpus"), ("second", "two-gpus")])
        .await;
    env.wait_bound(&["pair".to_owned()]).await;
    delete_pod_until_released(&env, "pair").await;

    let deadline = tokio::time::Instant::now() + WAIT;
    while !granted.is_subset(&recorder.accesses()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    running.stop().await;
    env.shutdown().await;
    recorder
}
