//! Request routing: turns a URL path into a discovery endpoint or a resource request
//! (resource, namespace, name, subresource), the way the Kubernetes API paths are laid out.
//!
//! Depends only on the resource registry and errors; no store access.

use std::sync::Arc;

use super::error::{Result, StatusError};
use super::resources::{Registry, ResourceInfo};

/// What a path addresses.
#[derive(Debug, Clone)]
pub enum Target {
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez`.
    Health,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    ResourceList(String, String),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiRoot,
    /// `/openapi/v3/{api/v1 | apis/group/version}`.
    OpenApiGroupVersion(String),
    /// A resource, collection or subresource.
    Resource(ResourceRequest),
}

/// A request on a resource path.
#[derive(Debug, Clone)]
pub struct ResourceRequest {
    /// The resource addressed.
    pub info: Arc<ResourceInfo>,
    /// Namespace from the path (namespaced resources only; `None` means all namespaces).
    pub namespace: Option<String>,
    /// Object name, if the path names one.
    pub name: Option<String>,
    /// Subresource (`status`, `binding`), if any; the legacy `bindings` collection is the
    /// `binding` subresource without a name.
    pub subresource: Option<String>,
}

/// Parses a request path against the registry.
pub fn parse(path: &str, registry: &Registry) -> Result<Target> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segs.as_slice() {
        ["version"] => Ok(Target::Version),
        ["healthz" | "readyz" | "livez"] => Ok(Target::Health),
        ["api"] => Ok(Target::CoreVersions),
        ["openapi", "v2"] => Ok(Target::OpenApiV2),
        ["openapi", "v3"] => Ok(Target::OpenApiRoot),
        ["openapi", "v3", rest @ ..] => Ok(Target::OpenApiGroupVersion(rest.join("/"))),
        ["api", "v1"] => Ok(Target::ResourceList(String::new(), "v1".into())),
        ["api", "v1", rest @ ..] => resource(registry, "", "v1", rest),
        ["apis"] => Ok(Target::Groups),
        ["apis", group] if !registry.groups().iter().any(|(g, _)| g == group) => {
            Err(StatusError::no_route())
        }
        ["apis", group] => Ok(Target::Group((*group).to_string())),
        ["apis", group, version] => {
            if registry.resources_of(group, version).is_empty() {
                Err(StatusError::no_route())
            } else {
                Ok(Target::ResourceList(
                    (*group).to_string(),
                    (*version).to_string(),
                ))
            }
        }
        ["apis", group, version, rest @ ..] => resource(registry, group, version, rest),
        _ => Err(StatusError::no_route()),
    }
}

fn resource(registry: &Registry, group: &str, version: &str, rest: &[&str]) -> Result<Target> {
    if let ("", "v1", ["namespaces", namespace, "bindings"]) = (group, version, rest) {
        return legacy_bindings(registry, namespace);
    }
    let namespaced_path = rest.len() >= 3
        && rest[0] == "namespaces"
        && registry
            .find(group, version, rest[2])
            .is_some_and(|i| i.namespaced);
    let (namespace, rest) = if namespaced_path {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 {
        return Err(StatusError::no_route());
    }
    let info = registry
        .find(group, version, rest[0])
        .ok_or_else(StatusError::no_route)?;
    let name = rest.get(1).map(|s| (*s).to_string());
    let subresource = rest.get(2).map(|s| (*s).to_string());
    if info.namespaced && namespace.is_none() && name.is_some() {
        return Err(StatusError::no_route());
    }
    match subresource.as_deref() {
        None => {}
        Some("status") if info.status => {}
        Some("binding") if info.binding => {}
        Some(_) => return Err(StatusError::no_route()),
    }
    Ok(Target::Resource(ResourceRequest {
        info,
        namespace,
        name,
        subresource,
    }))
}

/// The legacy `bindings` collection (`POST /api/v1/namespaces/{ns}/bindings`): the pod's `binding`
/// subresource with the pod named by the Binding's own `metadata.name`.
fn legacy_bindings(registry: &Registry, namespace: &str) -> Result<Target> {
    let pods = registry
        .find("", "v1", "pods")
        .ok_or_else(StatusError::no_route)?;
    Ok(Target::Resource(ResourceRequest {
        info: pods,
        namespace: Some(namespace.to_string()),
        name: None,
        subresource: Some("binding".into()),
    }))
}
