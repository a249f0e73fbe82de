//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}`, `/api/v1` and
//! `/apis/{group}/{version}` (legacy, non-aggregated discovery; clients asking for aggregated
//! discovery fall back to it because the answer is a plain `application/json` document).
//!
//! Depends on the registry only.

use std::net::SocketAddr;

use axum::response::Response;
use http::StatusCode;
use serde_json::{json, Value};

use super::error::{Result, StatusError};
use super::handlers::json_response;
use super::resources::{Registry, ResourceInfo};
use super::route::Target;

/// Serves a discovery target.
pub fn serve(registry: &Registry, target: &Target, addr: SocketAddr) -> Result<Response> {
    let body = match target {
        Target::Version => json!({
            "major": "1",
            "minor": registry.release().minor().to_string(),
            "gitVersion": registry.release().git_version(),
            "gitCommit": "dra-sim",
            "gitTreeState": "clean",
            "buildDate": "2024-04-17T00:00:00Z",
            "goVersion": "go1.22.2",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
        Target::Health => {
            return Ok(axum::response::IntoResponse::into_response((
                StatusCode::OK,
                "ok",
            )));
        }
        Target::CoreVersions => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}],
        }),
        Target::Groups => json!({
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": registry.groups().iter().map(|(g, vs)| group_json(g, vs)).collect::<Vec<_>>(),
        }),
        Target::Group(group) => {
            let versions = registry
                .groups()
                .into_iter()
                .find(|(g, _)| g == group)
                .map(|(_, v)| v)
                .ok_or_else(StatusError::no_route)?;
            let mut g = group_json(group, &versions);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            g
        }
        Target::ResourceList(group, version) => resource_list(registry, group, version),
        Target::OpenApiV2
        | Target::OpenApiRoot
        | Target::OpenApiGroupVersion(_)
        | Target::Resource(_) => return Err(StatusError::no_route()),
    };
    Ok(json_response(StatusCode::OK, &body))
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map_or(Value::Null, gv),
    })
}

fn resource_list(registry: &Registry, group: &str, version: &str) -> Value {
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut resources = Vec::new();
    for info in registry.resources_of(group, version) {
        resources.push(resource_json(&info));
        if info.status {
            resources.push(json!({
                "name": format!("{}/status", info.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if info.binding {
            resources.push(json!({
                "name": "bindings",
                "singularName": "binding",
                "namespaced": true,
                "kind": "Binding",
                "verbs": ["create"],
            }));
            resources.push(json!({
                "name": format!("{}/binding", info.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": "Binding",
                "verbs": ["create"],
            }));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

fn resource_json(info: &ResourceInfo) -> Value {
    let mut r = json!({
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": super::resources::VERBS,
    });
    if !info.short_names.is_empty() {
        r["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        r["categories"] = json!(info.categories);
    }
    r
}
