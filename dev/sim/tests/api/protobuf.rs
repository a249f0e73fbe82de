//! Request bodies in `application/vnd.kubernetes.protobuf` over HTTP: a built-in kind is created
//! from one and answered in JSON; a custom resource, which has no protobuf form, and a 1.30
//! `resource.k8s.io/v1alpha2` kind answer kube-apiserver's 415 with the media types they take.

use std::collections::BTreeMap;

use dra_sim::server::ServerConfig;
use dra_sim::KubernetesVersion;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube::api::Api;
use prost::Message;

use crate::api_support::{create, raw_bytes, start, start_with, widget_crd};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A namespace named `name` labelled `team=dra`, encoded as kubectl 1.32 and later send it.
fn namespace_body(api_version: &str, kind: &str, name: &str) -> Vec<u8> {
    let namespace = pb::Namespace {
        metadata: Some(ObjectMeta {
            name: Some(name.into()),
            labels: BTreeMap::from([("team".into(), "dra".into())]),
            ..ObjectMeta::default()
        }),
        ..pb::Namespace::default()
    };
    let envelope = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(namespace.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(envelope.encode_to_vec());
    body
}

#[tokio::test]
async fn a_protobuf_namespace_is_created_and_answered_in_json() {
    let (server, client) = start().await;
    let (code, created) = raw_bytes(
        &client,
        "POST",
        "/api/v1/namespaces",
        PROTOBUF,
        namespace_body("v1", "Namespace", "from-protobuf"),
    )
    .await;
    assert_eq!(code, 200, "{created}");
    assert_eq!(created["kind"], "Namespace");
    assert_eq!(created["metadata"]["labels"]["team"], "dra");

    let stored = Api::<Namespace>::all(client)
        .get("from-protobuf")
        .await
        .unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["team"], "dra");
    assert_eq!(stored.status.unwrap().phase.as_deref(), Some("Active"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_protobuf_body_for_a_custom_resource_is_refused_with_415() {
    let (server, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    create(&crds, &widget_crd("Namespaced", "widgets", "Widget")).await;
    let (code, refused) = raw_bytes(
        &client,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        PROTOBUF,
        namespace_body("example.com/v1", "Widget", "w1"),
    )
    .await;
    assert_eq!(code, 415, "{refused}");
    assert_eq!(refused["reason"], "UnsupportedMediaType");
    assert_eq!(
        refused["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_protobuf_body_for_a_v1alpha2_kind_is_refused_with_415() {
    let config = ServerConfig {
        kubernetes_version: KubernetesVersion::V1_30,
        ..ServerConfig::default()
    };
    let (server, client) = start_with(config).await;
    let (code, refused) = raw_bytes(
        &client,
        "POST",
        "/apis/resource.k8s.io/v1alpha2/resourceclasses",
        PROTOBUF,
        namespace_body("resource.k8s.io/v1alpha2", "ResourceClass", "c1"),
    )
    .await;
    assert_eq!(code, 415, "{refused}");
    assert_eq!(refused["reason"], "UnsupportedMediaType");
    server.shutdown().await;
}
