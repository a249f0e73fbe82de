//! Pod binding: the `pods/{name}/binding` subresource and the legacy `bindings` collection, which
//! names the pod by the Binding's `metadata.name`. A pod is assigned to a node exactly once and
//! marked scheduled; the Binding's `uid` and `resourceVersion` are preconditions on the pod, as in
//! the API server's `BindingREST`.

use axum::response::Response;
use http::StatusCode;
use serde_json::{json, Value};

use super::params::decode_body;
use super::write::now;
use super::{json_response, Call};
use crate::server::error::{FieldCause, Result, StatusError};
use crate::server::store::Change;

/// The qualified resource conflicts of a binding are reported on.
const BINDING_RESOURCE: &str = "pods/binding";

/// POST on `pods/{name}/binding` or on the `bindings` collection: assigns the pod to a node once.
pub(super) fn bind(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, body) = call.parts();
    let binding = decode_body(headers, body)?;
    let info = &req.info;
    let meta_str = |field: &str| {
        binding["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let body_name = meta_str("name");
    let name = req.name.clone().unwrap_or_else(|| body_name.clone());
    if name != body_name {
        return Err(StatusError::BadRequest(
            "name in URL does not match name in Binding object".into(),
        ));
    }
    let ns = req.namespace.clone().unwrap_or_default();
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if node.is_empty() {
        return Err(StatusError::invalid(
            "Binding",
            "",
            &name,
            vec![FieldCause::required("target.name", "")],
        ));
    }
    let (uid, resource_version) = (meta_str("uid"), meta_str("resourceVersion"));
    let annotations = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned();
    let dry_run = params.dry_run();
    state.store.modify(
        &info.storage_key(),
        &ns,
        &name,
        || StatusError::not_found(&info.plural, &info.group, &name),
        |current| {
            let meta = &current["metadata"];
            if !uid.is_empty() && meta["uid"].as_str() != Some(uid.as_str()) {
                let why = format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta["uid"].as_str().unwrap_or_default()
                );
                return Err(StatusError::conflict(&info.plural, &info.group, &name, &why));
            }
            if !resource_version.is_empty()
                && meta["resourceVersion"].as_str() != Some(resource_version.as_str())
            {
                return Err(StatusError::stale(&info.plural, &info.group, &name));
            }
            let refuse = |why: String| StatusError::conflict(BINDING_RESOURCE, "", &name, &why);
            if meta["deletionTimestamp"].is_string() {
                return Err(refuse(format!("pod {name} is being deleted, cannot be assigned to a host")));
            }
            if let Some(existing) = current["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(refuse(format!("pod {name} is already assigned to node \"{existing}\"")));
            }
            if current["spec"]["schedulingGates"].as_array().is_some_and(|g| !g.is_empty()) {
                return Err(refuse(format!("pod {name} has non-empty .spec.schedulingGates")));
            }
            if dry_run {
                return Ok(Change::Keep);
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
