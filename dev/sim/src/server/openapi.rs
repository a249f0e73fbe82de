//! A minimal `OpenAPI` v3 surface: `/openapi/v3` and one document per group/version listing, for each
//! resource, the write operations with their group-version-kind and the `fieldValidation` parameter.
//!
//! That is what `kubectl` checks to decide that the server validates fields itself, so plain
//! `kubectl apply`/`create` work without `--validate=false`. No schemas are published; `/openapi/v2`
//! answers 404 (kubectl then falls back to its compiled-in types for strategic merge patches).
//! Depends on the registry only.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::{json, Map, Value};

use super::resources::Registry;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn all_group_versions(registry: &Registry) -> Vec<(String, String)> {
    let mut gvs = vec![(String::new(), "v1".to_string())];
    for (g, versions) in registry.groups() {
        for v in versions {
            gvs.push((g.clone(), v));
        }
    }
    gvs
}

fn doc_hash(registry: &Registry, group: &str, version: &str) -> String {
    let mut h = DefaultHasher::new();
    for info in registry.resources_of(group, version) {
        (&info.plural, &info.kind, info.namespaced, info.status).hash(&mut h);
    }
    format!("{:016X}", h.finish())
}

/// The `/openapi/v3` discovery document.
pub fn root(registry: &Registry) -> Value {
    let paths: Map<String, Value> = all_group_versions(registry)
        .into_iter()
        .map(|(g, v)| {
            let p = gv_path(&g, &v);
            let url = format!("/openapi/v3/{p}?hash={}", doc_hash(registry, &g, &v));
            (p, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// The document of one group/version, or `None` if it is not served.
pub fn group_version(registry: &Registry, path: &str) -> Option<Value> {
    let (group, version) = match path
        .trim_matches('/')
        .split('/')
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["api", v] => (String::new(), (*v).to_string()),
        ["apis", g, v] => ((*g).to_string(), (*v).to_string()),
        _ => return None,
    };
    let infos = registry.resources_of(&group, &version);
    if infos.is_empty() {
        return None;
    }
    let prefix = format!("/{}", gv_path(&group, &version));
    let mut paths = Map::new();
    for info in infos {
        let item = if info.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", info.plural)
        } else {
            format!("{prefix}/{}/{{name}}", info.plural)
        };
        let gvk = json!({"group": info.group, "version": info.version, "kind": info.kind});
        let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", info.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation")],
                "responses": {"200": {"description": "OK"}},
            })
        };
        let params = json!([{"name": "name", "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}}]);
        paths.insert(item, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete"), "parameters": params}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": registry.release().git_version()},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
