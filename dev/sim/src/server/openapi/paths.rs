//! The paths of a served resource in an `OpenAPI` document: its collection (list, create), its
//! objects (read, replace, patch, delete) and their `status` subresource, each operation with
//! `x-kubernetes-action`, `x-kubernetes-group-version-kind` and the query parameters of the
//! verb. kubectl reads a PATCH operation's `fieldValidation` parameter to decide that the server
//! validates fields itself (then it skips its own validation).
//!
//! Pure functions of the resource description; no store or HTTP.

use serde_json::{json, Map, Value};

use super::schemas::Spec;
use crate::server::resources::ResourceInfo;

/// The query parameters of a write.
const WRITE_PARAMETERS: [&str; 3] = ["dryRun", "fieldManager", "fieldValidation"];

/// One operation of a path.
struct Operation<'a> {
    /// `get`, `post`, `put`, `patch` or `delete`.
    method: &'a str,
    /// kube-apiserver's `x-kubernetes-action`.
    action: &'a str,
    /// The verb of the `operationId` (`read`, `replace`, ...).
    verb: &'a str,
    /// What the `operationId` ends with after the kind (`Status` for the subresource).
    suffix: &'a str,
}

fn query(spec: Spec, name: &str) -> Value {
    match spec {
        Spec::V2 => json!({"name": name, "in": "query", "type": "string", "uniqueItems": true}),
        Spec::V3 => {
            json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
        }
    }
}

fn path_parameter(spec: Spec, name: &str) -> Value {
    match spec {
        Spec::V2 => json!({"name": name, "in": "path", "required": true, "type": "string"}),
        Spec::V3 => {
            json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}})
        }
    }
}

fn operation(spec: Spec, info: &ResourceInfo, definition: &str, op: &Operation<'_>) -> Value {
    let object = json!({"$ref": spec.reference(definition)});
    let body_schema = if op.method == "patch" {
        json!({"type": "object"})
    } else {
        object.clone()
    };
    let scope = if info.namespaced { "Namespaced" } else { "" };
    let mut out = json!({
        "operationId": format!("{}{scope}{}{}", op.verb, info.kind, op.suffix),
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind":
            {"group": info.group, "version": info.version, "kind": info.kind},
    });
    let writes = matches!(op.method, "post" | "put" | "patch");
    let mut parameters: Vec<Value> = if writes {
        WRITE_PARAMETERS.iter().map(|p| query(spec, p)).collect()
    } else {
        Vec::new()
    };
    match spec {
        Spec::V2 => {
            if writes {
                parameters.push(
                    json!({"name": "body", "in": "body", "required": true, "schema": body_schema}),
                );
            }
            out["responses"] = json!({"200": {"description": "OK", "schema": object}});
        }
        Spec::V3 => {
            if writes {
                out["requestBody"] =
                    json!({"content": {"*/*": {"schema": body_schema}}, "required": true});
            }
            out["responses"] = json!({"200": {"description": "OK",
                "content": {"application/json": {"schema": object}}}});
        }
    }
    out["parameters"] = Value::Array(parameters);
    out
}

fn item(spec: Spec, parameters: &[&str], ops: Vec<(&str, Value)>) -> Value {
    let mut item: Map<String, Value> = ops.into_iter().map(|(m, o)| (m.into(), o)).collect();
    let parameters: Vec<Value> = parameters.iter().map(|p| path_parameter(spec, p)).collect();
    item.insert("parameters".into(), Value::Array(parameters));
    Value::Object(item)
}

/// The paths of `info`, whose schema is the definition `definition`.
pub fn of(spec: Spec, info: &ResourceInfo, definition: &str) -> Vec<(String, Value)> {
    let prefix = if info.group.is_empty() {
        format!("/api/{}", info.version)
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    let (collection, scope): (String, &[&str]) = if info.namespaced {
        (
            format!("{prefix}/namespaces/{{namespace}}/{}", info.plural),
            &["namespace"],
        )
    } else {
        (format!("{prefix}/{}", info.plural), &[])
    };
    let with_name: Vec<&str> = scope.iter().copied().chain(["name"]).collect();
    let op = |method, action, verb, suffix| {
        let o = Operation {
            method,
            action,
            verb,
            suffix,
        };
        (method, operation(spec, info, definition, &o))
    };
    let mut paths = vec![
        (
            collection.clone(),
            item(
                spec,
                scope,
                vec![
                    op("get", "list", "list", ""),
                    op("post", "post", "create", ""),
                ],
            ),
        ),
        (
            format!("{collection}/{{name}}"),
            item(
                spec,
                &with_name,
                vec![
                    op("get", "get", "read", ""),
                    op("put", "put", "replace", ""),
                    op("patch", "patch", "patch", ""),
                    op("delete", "delete", "delete", ""),
                ],
            ),
        ),
    ];
    if info.status {
        paths.push((
            format!("{collection}/{{name}}/status"),
            item(
                spec,
                &with_name,
                vec![
                    op("get", "get", "read", "Status"),
                    op("put", "put", "replace", "Status"),
                    op("patch", "patch", "patch", "Status"),
                ],
            ),
        ));
    }
    paths
}
