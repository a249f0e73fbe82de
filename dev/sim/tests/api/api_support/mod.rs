//! Shared fixtures of the API server tests: a started server, a client, object builders and
//! error inspection.

#![allow(dead_code)]

pub mod kubectl;

use dra_sim::server::{ServerConfig, SimServer, SimServerHandle};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::json;

/// A server with default config and a client for it.
pub async fn start() -> (SimServerHandle, Client) {
    start_with(ServerConfig::default()).await
}

/// A server with the given config and a client for it.
pub async fn start_with(config: ServerConfig) -> (SimServerHandle, Client) {
    let handle = SimServer::start(config).await.expect("server starts");
    let client = handle.kube_client().expect("client builds");
    (handle, client)
}

/// The status code and reason of an API error.
pub fn api_error(err: &kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(resp) => (resp.code, resp.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A pod with one container.
pub fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }))
    .unwrap()
}

/// A config map with labels.
pub fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .unwrap()
}

/// A resource claim of class `gpu` without an explicit allocation mode.
pub fn claim(name: &str) -> ResourceClaim {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1alpha2",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"resourceClassName": "gpu"},
    }))
    .unwrap()
}

/// A pod scheduling context.
pub fn scheduling_context(name: &str) -> PodSchedulingContext {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selectedNode": "n1", "potentialNodes": ["n1", "n2"]},
    }))
    .unwrap()
}

/// Creates an object and returns the stored version.
pub async fn create<K>(api: &Api<K>, obj: &K) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj)
        .await
        .expect("create succeeds")
}

/// A raw request against the server, returning status and body.
pub async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    raw_bytes(client, method, path, content_type, body.as_bytes().to_vec()).await
}

/// A raw request with a binary body (protobuf), returning status and body.
pub async fn raw_bytes(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body)
        .unwrap();
    match client.request::<serde_json::Value>(req).await {
        Ok(v) => (200, v),
        Err(kube::Error::Api(resp)) => (
            resp.code,
            json!({"reason": resp.reason, "message": resp.message}),
        ),
        Err(other) => panic!("request failed: {other:?}"),
    }
}

/// A CRD of `example.com/v1` `kind` (`plural`), `scope` `Namespaced` or `Cluster`, with a status
/// subresource and a schema that keeps any field.
pub fn widget_crd(scope: &str, plural: &str, kind: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "names": {"plural": plural, "kind": kind, "shortNames": ["wd"]},
            "scope": scope,
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .unwrap()
}
