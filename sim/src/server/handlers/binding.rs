//! The pod `binding` subresource: assigns a pod to a node exactly once and marks it scheduled.

use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use super::params::decode_body;
use super::write::now;
use super::{json_response, AppState};
use crate::server::error::{ApiError, FieldCause, Result};
use crate::server::route::ResourceRequest;
use crate::server::store::Change;

/// POST on `pods/{name}/binding`: assigns the pod to a node once.
pub(super) fn bind(
    state: &AppState,
    req: &ResourceRequest,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response> {
    let binding = decode_body(headers, body)?;
    let info = &req.info;
    let name = req.name.clone().unwrap_or_default();
    let ns = req.namespace.clone().unwrap_or_default();
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            "",
            &name,
            vec![FieldCause::required("target.name", "")],
        ));
    }
    let annotations = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned();
    state.store.modify(
        &info.storage_key(),
        &ns,
        &name,
        || ApiError::not_found(&info.plural, &info.group, &name),
        |current| {
            if current["metadata"]["deletionTimestamp"].is_string() {
                return Err(ApiError::conflict(&info.plural, &info.group, &name, "pod is being deleted, cannot be assigned to a host"));
            }
            if let Some(existing) = current["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(
                    &info.plural,
                    &info.group,
                    &name,
                    &format!("pod {name} is already assigned to node \"{existing}\""),
                ));
            }
            let mut pod = (**current).clone();
            pod["spec"]["nodeName"] = json!(node);
            if let Some(a) = &annotations {
                for (k, v) in a {
                    pod["metadata"]["annotations"][k] = v.clone();
                }
            }
            let condition = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now()});
            let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
            let mut conditions: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != "PodScheduled").collect();
            conditions.push(condition);
            pod["status"]["conditions"] = Value::Array(conditions);
            Ok(Change::Put(pod))
        },
    )?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}
