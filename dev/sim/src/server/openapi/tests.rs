use http::HeaderValue;
use serde_json::json;

use super::*;
use crate::KubernetesVersion;

/// A store of `release` serving every `resource.k8s.io` version the release can serve, the
/// ones off by default included.
fn store(release: KubernetesVersion) -> Store {
    let api = crate::ServedApi {
        resource_versions: release.facts().resource_versions.to_vec(),
        ..crate::ServedApi::defaults(release)
    };
    Store::new(Registry::serving(&api), 100)
}

fn accept(value: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::ACCEPT, HeaderValue::from_static(value));
    headers
}

/// The definitions that name `group/version/kind` in `x-kubernetes-group-version-kind`.
fn defining(definitions: &Value, info: &ResourceInfo) -> Vec<String> {
    let gvk = json!({"group": info.group, "version": info.version, "kind": info.kind});
    definitions
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, d)| {
            d["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|l| l.contains(&gvk))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

#[test]
fn every_served_kind_of_every_release_has_one_schema_in_both_documents() {
    for release in KubernetesVersion::ALL {
        let store = store(release);
        let registry = store.registry();
        let v2 = v2_document(&store, &registry);
        for (group, version) in group_versions(&registry) {
            let v3 = group_version(&store, &registry, &group, &version).unwrap();
            for info in registry.resources_of(&group, &version) {
                let in_v2 = defining(&v2["definitions"], &info);
                let in_v3 = defining(&v3["components"]["schemas"], &info);
                assert_eq!(
                    in_v2.len(),
                    1,
                    "{release} {}: {in_v2:?}",
                    info.api_version()
                );
                assert_eq!(in_v2, in_v3, "{release} {}", info.api_version());
                let in_v3 = &v3["components"]["schemas"][&in_v3[0]];
                assert!(in_v3["properties"]["metadata"].is_object(), "{}", info.kind);
                // Swagger 2.0 keeps the properties of a kind with a model; an open object
                // (v1beta1, which no model describes) is published without them.
                let in_v2 = &v2["definitions"][&in_v2[0]];
                let modelled = info.group != "resource.k8s.io" || info.version != "v1beta1";
                assert_eq!(
                    in_v2["properties"]["metadata"].is_object(),
                    modelled,
                    "{release} {} {}",
                    info.api_version(),
                    info.kind
                );
            }
        }
    }
}

#[test]
fn references_resolve_within_each_document() {
    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    out.push(r.clone());
                }
                o.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    for release in KubernetesVersion::ALL {
        let store = store(release);
        let registry = store.registry();
        let v2 = v2_document(&store, &registry);
        let mut found = Vec::new();
        refs(&v2, &mut found);
        for r in found {
            let name = r.strip_prefix("#/definitions/").expect("a v2 reference");
            assert!(v2["definitions"].get(name).is_some(), "{release}: {r}");
        }
        let v3 = group_version(&store, &registry, "", "v1").unwrap();
        let mut found = Vec::new();
        refs(&v3, &mut found);
        for r in found {
            let name = r
                .strip_prefix("#/components/schemas/")
                .expect("a v3 reference");
            assert!(v3["components"]["schemas"].get(name).is_some(), "{r}");
        }
    }
}

#[test]
fn the_resource_v1_schema_of_1_34_has_the_model_fields() {
    let store = store(KubernetesVersion::V1_34);
    let registry = store.registry();
    let v3 = group_version(&store, &registry, "resource.k8s.io", "v1").unwrap();
    let schemas = &v3["components"]["schemas"];
    let info = registry
        .find("resource.k8s.io", "v1", "resourceclaims")
        .unwrap();
    let name = defining(schemas, &info).remove(0);
    let spec = &schemas[&name]["properties"]["spec"];
    assert!(
        spec["allOf"][0]["$ref"].is_string() || spec["$ref"].is_string(),
        "{spec}"
    );
    assert!(
        group_version(&store, &registry, "resource.k8s.io", "v1alpha2").is_none(),
        "1.34 serves no v1alpha2"
    );
}

#[test]
fn patch_operations_declare_field_validation() {
    let store = store(KubernetesVersion::V1_30);
    let registry = store.registry();
    let v2 = v2_document(&store, &registry);
    let patch = &v2["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    let names: Vec<&str> = patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"fieldValidation"), "{names:?}");
}

#[test]
fn the_v3_root_lists_each_group_version_with_a_hash_of_its_document() {
    let store = store(KubernetesVersion::V1_34);
    let registry = store.registry();
    let root = root(&store, &registry);
    let paths = root["paths"].as_object().unwrap();
    assert_eq!(paths.len(), group_versions(&registry).len());
    let url = paths["apis/resource.k8s.io/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap();
    assert!(
        url.starts_with("/openapi/v3/apis/resource.k8s.io/v1?hash="),
        "{url}"
    );
}

#[test]
fn v2_is_json_or_protobuf_as_the_client_asks_and_406_otherwise() {
    let store = store(KubernetesVersion::V1_30);
    let content_type = |headers: &HeaderMap| {
        let response = serve(&store, &Target::OpenApiV2, headers).unwrap();
        response.headers()[http::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(content_type(&HeaderMap::new()), "application/json");
    assert_eq!(
        content_type(&accept("application/json, */*")),
        "application/json"
    );
    assert_eq!(
        content_type(&accept(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        )),
        V2_PROTOBUF
    );
    let refused = serve(&store, &Target::OpenApiV2, &accept("text/html")).unwrap_err();
    assert_eq!(refused.code(), StatusCode::NOT_ACCEPTABLE);
}

#[test]
fn the_protobuf_document_starts_as_gnostic_encodes_it() {
    let store = store(KubernetesVersion::V1_30);
    let registry = store.registry();
    let bytes = proto::encode_v2(&v2_document(&store, &registry));
    // Field 1 (swagger) "2.0", then field 2 (info) whose field 1 (title) is "Kubernetes".
    assert_eq!(&bytes[..6], &[0x0a, 0x03, b'2', b'.', b'0', 0x12]);
    assert_eq!(&bytes[7..9], &[0x0a, 10]);
    assert_eq!(&bytes[9..19], b"Kubernetes");
}
