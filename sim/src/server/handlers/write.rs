//! Writes: create (generateName, uid, timestamps, defaulting, validation), update with the
//! resourceVersion precondition and the status subresource rules, patch (merge, JSON, strategic)
//! and the pod `binding` subresource.
//!
//! Every read-modify-write runs inside one store operation so concurrent writers see 409 Conflict
//! exactly as against etcd.

use std::sync::Arc;

use axum::response::Response;
use http::{HeaderMap, StatusCode};
use rand::Rng;
use serde_json::{json, Map, Value};

use super::params::decode_body;
use super::read::{format_of, with_gvk};
use super::{json_response, AppState, Params};
use crate::server::convert;
use crate::server::crd;
use crate::server::defaults;
use crate::server::error::{ApiError, FieldCause, Result};
use crate::server::patch::{self, PatchKind};
use crate::server::render;
use crate::server::resources::ResourceInfo;
use crate::server::route::ResourceRequest;
use crate::server::store::{Change, Written};
use crate::server::validation;

/// The current time in the API's RFC 3339 form (second precision, `Z`).
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn check_type(info: &ResourceInfo, obj: &mut Value) -> Result<()> {
    let want_av = info.api_version();
    match obj["apiVersion"].as_str() {
        None | Some("") => {}
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )))
        }
    }
    match obj["kind"].as_str() {
        None | Some("") => {}
        Some(k) if k == info.kind => {}
        Some(k) => {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                info.kind
            )))
        }
    }
    obj["apiVersion"] = json!(want_av);
    obj["kind"] = json!(info.kind);
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    Ok(())
}

fn check_namespace(req: &ResourceRequest, obj: &mut Value) -> Result<()> {
    let body_ns = obj["metadata"]["namespace"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if req.info.namespaced {
        let ns = req.namespace.clone().unwrap_or_default();
        if body_ns.is_some_and(|b| b != ns) {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        obj["metadata"]["namespace"] = json!(ns);
    } else if let Some(meta) = obj["metadata"].as_object_mut() {
        meta.remove("namespace");
    }
    Ok(())
}

fn generate_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Checks that the namespace of a namespaced write exists and is not terminating.
pub(super) fn check_namespace_open(
    state: &AppState,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
) -> Result<()> {
    if !info.namespaced {
        return Ok(());
    }
    let namespace = state
        .store
        .get("/namespaces", "", ns)
        .ok_or_else(|| ApiError::not_found("namespaces", "", ns))?;
    if namespace["metadata"]["deletionTimestamp"].is_string() {
        return Err(ApiError::Forbidden(format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            info.plural
        )));
    }
    Ok(())
}

/// POST on a collection.
pub(super) fn create(
    state: &AppState,
    req: &ResourceRequest,
    params: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response> {
    let info = &req.info;
    let mut obj = decode_body(headers, body)?;
    check_type(info, &mut obj)?;
    check_namespace(req, &mut obj)?;
    let mut obj = convert::to_storage(info, obj);
    let meta = obj["metadata"]
        .as_object_mut()
        .ok_or_else(|| ApiError::BadRequest("metadata must be an object".into()))?;
    if meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::Internal(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    let mut name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        let prefix = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                &info.kind,
                &info.group,
                "",
                vec![FieldCause::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
        name = format!("{prefix}{}", generate_suffix());
        meta.insert("name".into(), json!(name));
    }
    let created = now();
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(created));
    if info.tracks_generation() {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    for field in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
        "selfLink",
        "managedFields",
    ] {
        meta.remove(field);
    }
    let ns = req.namespace.clone().unwrap_or_default();
    check_namespace_open(state, info, &ns, &name)?;
    if info.status && info.kind != "Node" {
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
    }
    defaults::apply_create_defaults(info, &mut obj);
    validation::validate_create(info, &obj)?;
    let is_crd = info.kind == "CustomResourceDefinition";
    if is_crd {
        crd::prepare(&mut obj, &created);
    }
    if params.dry_run() {
        return Ok(json_response(StatusCode::CREATED, &with_gvk(info, &obj)));
    }
    let stored = state.store.create(
        &info.storage_key(),
        &ns,
        &name,
        &info.group,
        &info.plural,
        obj,
    )?;
    if is_crd {
        crd::register(&state.store, &stored);
    }
    Ok(json_response(
        StatusCode::CREATED,
        &render::object(format_of(headers, params), info, &with_gvk(info, &stored)),
    ))
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

fn without(obj: &Value, keys: &[&str]) -> Map<String, Value> {
    let mut m = obj.as_object().cloned().unwrap_or_default();
    for k in keys {
        m.remove(*k);
    }
    m
}

/// Computes what an update of `current` to `incoming` stores, applying the status subresource rules,
/// immutable metadata, generation, the resourceVersion precondition and validation.
pub(super) fn merge_update(
    info: &ResourceInfo,
    sub: Option<&str>,
    current: &Value,
    mut incoming: Value,
) -> Result<Change> {
    let name = meta_str(current, "name").to_string();
    let wanted_rv = meta_str(&incoming, "resourceVersion");
    if !wanted_rv.is_empty() && wanted_rv != meta_str(current, "resourceVersion") {
        return Err(ApiError::stale(&info.plural, &info.group, &name));
    }
    if !meta_str(&incoming, "uid").is_empty()
        && meta_str(&incoming, "uid") != meta_str(current, "uid")
    {
        return Err(ApiError::conflict(
            &info.plural,
            &info.group,
            &name,
            &format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                meta_str(&incoming, "uid"),
                meta_str(current, "uid")
            ),
        ));
    }
    let mut new = if sub == Some("status") {
        let mut new = current.clone();
        match incoming.get("status") {
            Some(s) if !s.is_null() => new["status"] = s.clone(),
            _ => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        new
    } else {
        if info.status {
            match current.get("status") {
                Some(s) => incoming["status"] = s.clone(),
                None => {
                    if let Some(o) = incoming.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        if !incoming["metadata"].is_object() {
            incoming["metadata"] = json!({});
        }
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
        ] {
            match current["metadata"].get(field) {
                Some(v) => incoming["metadata"][field] = v.clone(),
                None => {
                    if let Some(m) = incoming["metadata"].as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
        incoming["apiVersion"] = current["apiVersion"].clone();
        incoming["kind"] = current["kind"].clone();
        incoming
    };
    if info.tracks_generation()
        && without(&new, &["metadata", "status"]) != without(current, &["metadata", "status"])
    {
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        new["metadata"]["generation"] = json!(generation);
    }
    validation::validate_update(info, current, &new)?;
    let deleting = new["metadata"]["deletionTimestamp"].is_string();
    let finalizers_left = new["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    let grace = new["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(0);
    if deleting && !finalizers_left && grace == 0 {
        return Ok(Change::Remove);
    }
    Ok(Change::Put(new))
}

fn check_body_name(req: &ResourceRequest, obj: &Value) -> Result<()> {
    let url_name = req.name.as_deref().unwrap_or_default();
    match obj["metadata"]["name"].as_str() {
        Some(n) if !n.is_empty() && n != url_name => Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({url_name})"
        ))),
        _ => Ok(()),
    }
}

fn finish_write(
    state: &AppState,
    req: &ResourceRequest,
    params: &Params,
    headers: &HeaderMap,
    written: &Written,
) -> Response {
    let info = &req.info;
    if info.kind == "CustomResourceDefinition" {
        match written {
            Written::Stored(o) => crd::register(&state.store, o),
            Written::Removed(o) => crd::unregister(&state.store, o),
            Written::Unchanged(_) => {}
        }
    }
    let obj = with_gvk(info, written.object());
    json_response(
        StatusCode::OK,
        &render::object(format_of(headers, params), info, &obj),
    )
}

fn run_update(
    state: &AppState,
    req: &ResourceRequest,
    params: &Params,
    compute: impl FnOnce(&Value) -> Result<Value>,
) -> Result<Written> {
    let info = &req.info;
    let name = req.name.clone().unwrap_or_default();
    let ns = req.namespace.clone().unwrap_or_default();
    let sub = req.subresource.as_deref();
    let dry_run = params.dry_run();
    let mut dry_result = None;
    let written = state.store.modify(
        &info.storage_key(),
        &ns,
        &name,
        || ApiError::not_found(&info.plural, &info.group, &name),
        |current| {
            let incoming = compute(current)?;
            let change = merge_update(info, sub, current, incoming)?;
            if dry_run {
                if let Change::Put(v) = change {
                    dry_result = Some(v);
                }
                return Ok(Change::Keep);
            }
            Ok(change)
        },
    )?;
    Ok(dry_result.map_or(written, |v| Written::Unchanged(Arc::new(v))))
}

/// PUT on an object or its status.
pub(super) fn update(
    state: &AppState,
    req: &ResourceRequest,
    params: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response> {
    let mut obj = decode_body(headers, body)?;
    check_type(&req.info, &mut obj)?;
    check_body_name(req, &obj)?;
    check_namespace(req, &mut obj)?;
    let obj = convert::to_storage(&req.info, obj);
    let written = run_update(state, req, params, move |_| Ok(obj))?;
    Ok(finish_write(state, req, params, headers, &written))
}

/// PATCH on an object or its status.
pub(super) fn patch(
    state: &AppState,
    req: &ResourceRequest,
    params: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response> {
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let kind = PatchKind::from_content_type(content_type)?;
    let info = req.info.clone();
    let written = run_update(state, req, params, |current| {
        let patched = convert::to_storage(
            &info,
            patch::apply(&info, kind, &with_gvk(&info, current), body)?,
        );
        if patched["metadata"]["name"] != current["metadata"]["name"] {
            return Err(ApiError::BadRequest(
                "metadata.name may not be changed by a patch".into(),
            ));
        }
        Ok(patched)
    })?;
    Ok(finish_write(state, req, params, headers, &written))
}

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
