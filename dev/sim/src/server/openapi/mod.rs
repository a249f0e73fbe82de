//! The `OpenAPI` documents of what the server serves, as kube-apiserver publishes them:
//! `/openapi/v2` (Swagger 2.0: every path and definition in one document, in JSON or, for a
//! client that asks for it, gnostic's protobuf encoding), `/openapi/v3` (the list of group
//! versions, each with a hash of its document) and `/openapi/v3/{api/v1 | apis/GROUP/VERSION}`
//! (`OpenAPI` 3.0: the group version's paths and the schemas they use).
//!
//! Every document is built from the registry at the time of the request, so it always shows
//! what the simulated release serves, custom resources included: the paths come from the
//! resource descriptions ([`paths`]), the schemas from the Rust types the server decodes the
//! kinds with and from the CRDs' `openAPIV3Schema` ([`schemas`]). kubectl reads them for its
//! client-side validation (1.27 and 1.28 from `/openapi/v2` in protobuf, later ones from v3),
//! for `kubectl explain`, and to learn that the server validates fields (`fieldValidation`).
//!
//! Depends on the registry and reads CRDs from the store; no other part of the server.

mod paths;
mod proto;
pub(super) mod schemas;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::{json, Map, Value};

use super::error::{Result, StatusError};
use super::handlers::json_response;
use super::resources::{Registry, ResourceInfo};
use super::route::Target;
use super::store::Store;
use schemas::{Definitions, Spec};

/// The media type of the protobuf encoding of the v2 document, as kube-openapi answers it
/// (clients ask for it as `...spec.v2@v1.0+protobuf`, which Go's MIME parser cannot read back).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Serves an `OpenAPI` target (`/openapi/v2`, `/openapi/v3`, `/openapi/v3/...`).
pub fn serve(store: &Store, target: &Target, headers: &HeaderMap) -> Result<Response> {
    let registry = store.registry();
    match target {
        Target::OpenApiV2 => v2(store, &registry, headers),
        Target::OpenApiRoot => Ok(json_response(StatusCode::OK, &root(store, &registry))),
        Target::OpenApiGroupVersion(path) => {
            let (group, version) = parse_group_version(path).ok_or_else(StatusError::no_route)?;
            let document = group_version(store, &registry, &group, &version)
                .ok_or_else(StatusError::no_route)?;
            Ok(json_response(StatusCode::OK, &document))
        }
        _ => Err(StatusError::no_route()),
    }
}

/// Every group version served, the core group first.
fn group_versions(registry: &Registry) -> Vec<(String, String)> {
    let mut out = vec![(String::new(), "v1".to_owned())];
    for (group, versions) in registry.groups() {
        out.extend(versions.into_iter().map(|v| (group.clone(), v)));
    }
    out
}

/// `api/v1` or `apis/GROUP/VERSION`.
fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn parse_group_version(path: &str) -> Option<(String, String)> {
    match path
        .trim_matches('/')
        .split('/')
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["api", version] => Some((String::new(), (*version).to_owned())),
        ["apis", group, version] => Some(((*group).to_owned(), (*version).to_owned())),
        _ => None,
    }
}

/// The CRD declaring a custom resource.
fn crd_of(store: &Store, info: &ResourceInfo) -> Option<Arc<Value>> {
    if !info.custom {
        return None;
    }
    let name = format!("{}.{}", info.plural, info.group);
    store.get("apiextensions.k8s.io/customresourcedefinitions", "", &name)
}

/// Paths and definitions of `resources` in the form of `spec`.
fn paths_and_definitions(
    store: &Store,
    spec: Spec,
    resources: &[Arc<ResourceInfo>],
) -> (Map<String, Value>, Map<String, Value>) {
    let mut definitions = Definitions::new(spec);
    let mut paths = Map::new();
    for info in resources {
        let crd = crd_of(store, info);
        let name = definitions.add(info, crd.as_deref());
        paths.extend(paths::of(spec, info, &name));
    }
    (paths, definitions.finish())
}

fn info(registry: &Registry) -> Value {
    json!({"title": "Kubernetes", "version": registry.release().git_version()})
}

/// The v3 document of one group version, or `None` if it is not served.
fn group_version(store: &Store, registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources = registry.resources_of(group, version);
    if resources.is_empty() {
        return None;
    }
    let (paths, schemas) = paths_and_definitions(store, Spec::V3, &resources);
    Some(json!({
        "openapi": "3.0.0",
        "info": info(registry),
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The `/openapi/v3` discovery document: each group version's document with its hash, which
/// changes whenever the document does (clients cache by it).
fn root(store: &Store, registry: &Registry) -> Value {
    let paths: Map<String, Value> = group_versions(registry)
        .into_iter()
        .filter_map(|(group, version)| {
            let document = group_version(store, registry, &group, &version)?;
            let mut hasher = DefaultHasher::new();
            document.to_string().hash(&mut hasher);
            let path = group_version_path(&group, &version);
            let url = format!("/openapi/v3/{path}?hash={:016X}", hasher.finish());
            Some((path, json!({"serverRelativeURL": url})))
        })
        .collect();
    json!({"paths": paths})
}

/// The whole v2 document.
fn v2_document(store: &Store, registry: &Registry) -> Value {
    let resources: Vec<Arc<ResourceInfo>> = group_versions(registry)
        .iter()
        .flat_map(|(group, version)| registry.resources_of(group, version))
        .collect();
    let (paths, definitions) = paths_and_definitions(store, Spec::V2, &resources);
    json!({
        "swagger": "2.0",
        "info": info(registry),
        "paths": paths,
        "definitions": definitions,
    })
}

/// How the client wants the v2 document, from its `Accept` header: the first entry the server
/// can give; JSON when there is no header.
fn v2_encoding(headers: &HeaderMap) -> Option<&'static str> {
    let Some(accept) = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return Some("application/json");
    };
    accept.split(',').find_map(|entry| {
        let media = entry.split(';').next().unwrap_or_default().trim();
        match media {
            "application/json" | "*/*" | "application/*" => Some("application/json"),
            m if m.starts_with("application/com.github.proto-openapi.spec.v2") => Some(V2_PROTOBUF),
            _ => None,
        }
    })
}

fn v2(store: &Store, registry: &Registry, headers: &HeaderMap) -> Result<Response> {
    let encoding = v2_encoding(headers).ok_or_else(|| {
        StatusError::NotAcceptable(format!(
            "only the following media types are accepted: application/json, {V2_PROTOBUF}"
        ))
    })?;
    let document = v2_document(store, registry);
    if encoding == V2_PROTOBUF {
        let bytes = proto::encode_v2(&document);
        return Ok((
            StatusCode::OK,
            [(http::header::CONTENT_TYPE, V2_PROTOBUF)],
            bytes,
        )
            .into_response());
    }
    Ok(json_response(StatusCode::OK, &document))
}

#[cfg(test)]
mod tests;
