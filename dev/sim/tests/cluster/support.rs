//! Helpers several cluster test files share: creating and reading pods, their phase and node,
//! listing objects, the core/v1 events about an object, `v1alpha2` claims and the size of the
//! batch tests.
//!
//! Only reads and writes through the API; no assertion lives here.

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1alpha2::{ResourceClaim, ResourceClaimSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;

/// Creates `pod` in the default namespace.
pub async fn create_pod(client: &Client, pod: &Pod) {
    Api::<Pod>::default_namespaced(client.clone())
        .create(&PostParams::default(), pod)
        .await
        .expect("pod created");
}

/// The pod `name` of the default namespace, which must exist.
pub async fn get_pod(client: &Client, name: &str) -> Pod {
    Api::<Pod>::default_namespaced(client.clone())
        .get(name)
        .await
        .expect("pod exists")
}

/// The pod's phase; empty while it has none.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The node the pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// Every object `api` lists.
pub async fn list<K: Clone + DeserializeOwned + std::fmt::Debug>(api: Api<K>) -> Vec<K> {
    api.list(&ListParams::default()).await.unwrap().items
}

/// The core/v1 events with `reason` about the object `name` of the default namespace.
pub async fn events_about(client: &Client, name: &str, reason: &str) -> Vec<Event> {
    list(Api::<Event>::default_namespaced(client.clone()))
        .await
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// Creates the `v1alpha2` claim `name` of `class` in the default namespace; without an
/// `allocation_mode` it waits for its first consumer.
pub async fn create_v1alpha2_claim(
    client: &Client,
    name: &str,
    class: &str,
    allocation_mode: Option<&str>,
) -> ResourceClaim {
    let claim = ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            resource_class_name: class.into(),
            allocation_mode: allocation_mode.map(Into::into),
            parameters_ref: None,
        },
        status: None,
    };
    Api::<ResourceClaim>::default_namespaced(client.clone())
        .create(&PostParams::default(), &claim)
        .await
        .expect("claim created")
}

/// The pods of a batch test: `DRA_SIM_BATCH_PODS` if set (e.g. 1000), else `default`.
pub fn batch_size(default: usize) -> usize {
    std::env::var("DRA_SIM_BATCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
