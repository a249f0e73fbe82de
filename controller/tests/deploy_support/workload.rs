//! The workload of the RBAC test: the controller runs against the simulated cluster with a client
//! that records its requests, while the examples of `deploy/examples/` are applied (the class
//! replaces the fixture's own), an immediate claim is allocated and deleted, a claim with invalid
//! parameters fails repeatedly (its Warning event is created, then patched), and the example pod
//! is bound and deleted.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{
    ResourceClaim, ResourceClaimParametersReference, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClass,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::rbac::{Access, RecordingLayer};
use super::{deploy_dir, documents, Document};
use crate::e2e_support::{count, node, wait_until, Env, Running, WAIT};
use dra_controller::params::{DeviceClaimParameters, DeviceClassParameters, API_GROUP};

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

/// An immediate claim of class `gpu` with claim parameters `params`.
fn immediate_claim(name: &str, params: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            resource_class_name: "gpu".into(),
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

/// Runs the workload of the module docs with the controller's requests recorded; returns the
/// recorder once every access of `granted` was seen or [`WAIT`] passed.
pub async fn run_examples_and_record(granted: &BTreeSet<Access>) -> RecordingLayer {
    let nodes: Vec<_> = (0..2)
        .map(|i| node(&format!("node-{i}"), "H100", "80Gi", &[0, 0, 1, 1]))
        .collect();
    let env = Env::start(&nodes).await;
    let client = env.client.clone();
    // The example class has the fixture's names: it replaces the fixture's class.
    Api::<ResourceClass>::all(client.clone())
        .delete("gpu", &DeleteParams::default())
        .await
        .expect("fixture class deleted");
    Api::<DeviceClassParameters>::all(client.clone())
        .delete("gpu-defaults", &DeleteParams::default())
        .await
        .expect("fixture class parameters deleted");
    apply_example(&client, "gpu-class.yaml").await;

    let recorder = RecordingLayer::default();
    let url = env
        .cluster
        .as_ref()
        .expect("in-process cluster")
        .url()
        .parse()
        .expect("cluster URL");
    let mut config = kube::Config::new(url);
    config.default_namespace = "default".into();
    config.read_timeout = None;
    let recorded_client = kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(&recorder)
        .build();
    let running = Running::start(&recorded_client, &env.ledger_path(), 2).await;

    apply_example(&client, "gpu-claim.yaml").await;
    let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
    claims
        .create(
            &PostParams::default(),
            &immediate_claim("immediate", "two-gpus-same-numa"),
        )
        .await
        .expect("immediate claim created");
    env.params("broken", count(0)).await;
    claims
        .create(&PostParams::default(), &immediate_claim("broken", "broken"))
        .await
        .expect("broken claim created");

    env.wait_bound(&["trainer".to_owned()]).await;
    let allocated = |name: &'static str| {
        let env = &env;
        move || async move {
            env.allocated_claims()
                .await
                .iter()
                .any(|c| c.name == name)
                .then_some(())
        }
    };
    wait_until("immediate claim allocated", WAIT, allocated("immediate")).await;
    assert_eq!(
        env.claims_of_pod("trainer").await["gpus"]
            .data
            .devices
            .len(),
        2
    );

    claims
        .delete("immediate", &DeleteParams::default())
        .await
        .expect("immediate claim deleted");
    Api::<Pod>::default_namespaced(client.clone())
        .delete("trainer", &DeleteParams::default())
        .await
        .expect("pod deleted");
    wait_until("claims released", WAIT, || async {
        env.allocated_claims().await.is_empty().then_some(())
    })
    .await;

    let deadline = tokio::time::Instant::now() + WAIT;
    while !granted.is_subset(&recorder.accesses()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    running.stop().await;
    env.shutdown().await;
    recorder
}
