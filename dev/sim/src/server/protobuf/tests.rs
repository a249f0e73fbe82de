use std::collections::BTreeMap;

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::*;
use crate::server::resources::{builtin_resources_of, ResourceInfo};
use crate::KubernetesVersion;

fn info(release: KubernetesVersion, group: &str, kind: &str) -> ResourceInfo {
    builtin_resources_of(&crate::ServedApi::defaults(release))
        .into_iter()
        .find(|i| i.group == group && i.kind == kind)
        .unwrap()
}

/// `message` as kube-apiserver's protobuf serializer writes it: magic, then the envelope.
fn body(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let envelope = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(envelope.encode_to_vec());
    out
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: BTreeMap::from([("app".into(), "web".into())]),
        creation_timestamp: Some(Time {
            seconds: Some(1_800_000_000),
            nanos: Some(0),
        }),
        ..ObjectMeta::default()
    }
}

#[test]
fn a_config_map_reads_as_its_json_with_base64_binary_data() {
    let config_map = core::ConfigMap {
        metadata: Some(meta("cm")),
        data: BTreeMap::from([("a".into(), "1".into())]),
        binary_data: BTreeMap::from([("b".into(), b"hi".to_vec())]),
        immutable: Some(true),
    };
    let info = info(KubernetesVersion::V1_30, "", "ConfigMap");
    let object = decode(&info, &body("v1", "ConfigMap", &config_map)).unwrap();
    assert_eq!(
        object,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"app": "web"},
                "creationTimestamp": "2027-01-15T08:00:00Z"},
            "data": {"a": "1"}, "binaryData": {"b": "aGk="}, "immutable": true})
    );
}

#[test]
fn pod_fields_keep_their_json_names_and_special_forms() {
    let container = core::Container {
        name: Some("c".into()),
        image: Some("busybox".into()),
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([(
                "memory".into(),
                Quantity {
                    string: Some("1Gi".into()),
                },
            )]),
            ..Default::default()
        }),
        liveness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                tcp_socket: Some(core::TcpSocketAction {
                    port: Some(IntOrString {
                        r#type: Some(1),
                        int_val: None,
                        str_val: Some("http".into()),
                    }),
                    host: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = core::Pod {
        metadata: Some(meta("p")),
        spec: Some(core::PodSpec {
            containers: vec![container],
            host_ipc: Some(true),
            ..Default::default()
        }),
        status: None,
    };
    let info = info(KubernetesVersion::V1_34, "", "Pod");
    let object = decode(&info, &body("v1", "Pod", &pod)).unwrap();
    assert_eq!(object["spec"]["hostIPC"], json!(true));
    let c = &object["spec"]["containers"][0];
    assert_eq!(c["resources"]["limits"]["memory"], json!("1Gi"));
    assert_eq!(c["livenessProbe"]["tcpSocket"]["port"], json!("http"));
    assert!(object.get("status").is_none(), "{object}");
}

#[test]
fn a_body_without_the_magic_is_a_bad_request() {
    let info = info(KubernetesVersion::V1_30, "", "Namespace");
    let error = decode(&info, b"{\"kind\": \"Namespace\"}").unwrap_err();
    assert!(
        matches!(&error, StatusError::BadRequest(m) if m.contains("expected prefix")),
        "{error:?}"
    );
}

#[test]
fn kinds_without_a_protobuf_form_answer_415_with_what_they_accept() {
    let namespace = core::Namespace {
        metadata: Some(meta("n")),
        ..Default::default()
    };
    let bytes = body("v1", "Namespace", &namespace);
    let claim = info(KubernetesVersion::V1_30, "resource.k8s.io", "ResourceClaim");
    let mut custom = info(KubernetesVersion::V1_30, "", "ConfigMap");
    custom.custom = true;
    for refused in [claim, custom] {
        let error = decode(&refused, &bytes).unwrap_err();
        assert_eq!(error.code(), http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(
            error.to_string(),
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
        );
    }
    let namespaces = info(KubernetesVersion::V1_30, "", "Namespace");
    assert!(unsupported(&namespaces)
        .to_string()
        .ends_with("application/vnd.kubernetes.protobuf"));
}
