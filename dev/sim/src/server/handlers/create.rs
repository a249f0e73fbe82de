//! POST on a collection: type and namespace checks, generateName, server-set metadata (uid,
//! creationTimestamp), status reset for kinds with a status subresource, defaulting, validation,
//! and CRD establishment.

use axum::response::Response;
use http::StatusCode;
use rand::Rng;
use serde_json::{json, Value};

use super::params::decode_object;
use super::read::format_of;
use super::write::now;
use super::{object_response, AppState, Call};
use crate::server::convert;
use crate::server::crd;
use crate::server::defaults;
use crate::server::error::{FieldCause, Result, StatusError};
use crate::server::resource_v1;
use crate::server::resources::ResourceInfo;
use crate::server::route::ResourceRequest;
use crate::server::typed;
use crate::server::validation;

pub(super) fn check_type(info: &ResourceInfo, obj: &mut Value) -> Result<()> {
    let want_av = info.api_version();
    match obj["apiVersion"].as_str() {
        None | Some("") => {}
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(StatusError::BadRequest(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )))
        }
    }
    match obj["kind"].as_str() {
        None | Some("") => {}
        Some(k) if k == info.kind => {}
        Some(k) => {
            return Err(StatusError::BadRequest(format!(
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

pub(super) fn check_namespace(req: &ResourceRequest, obj: &mut Value) -> Result<()> {
    let body_ns = obj["metadata"]["namespace"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if req.info.namespaced {
        let ns = req.namespace.clone().unwrap_or_default();
        if body_ns.is_some_and(|b| b != ns) {
            return Err(StatusError::BadRequest(
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
        .ok_or_else(|| StatusError::not_found("namespaces", "", ns))?;
    if namespace["metadata"]["deletionTimestamp"].is_string() {
        return Err(StatusError::Forbidden(format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            info.plural
        )));
    }
    Ok(())
}

/// POST on a collection.
pub(super) fn create(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, body) = call.parts();
    let info = &req.info;
    let mut obj = decode_object(&req.info, headers, body)?;
    check_type(info, &mut obj)?;
    check_namespace(req, &mut obj)?;
    let mut obj = typed::normalise(info, convert::to_storage(info, obj), params.strict_fields())?;
    let meta = obj["metadata"]
        .as_object_mut()
        .ok_or_else(|| StatusError::BadRequest("metadata must be an object".into()))?;
    let created = now();
    let name = server_metadata(info, meta, &created)?;
    let ns = req.namespace.clone().unwrap_or_default();
    check_namespace_open(state, info, &ns, &name)?;
    if info.status && info.kind != "Node" {
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
    }
    defaults::apply_create_defaults(info, &mut obj);
    resource_v1::prepare_for_write(info, &mut obj, None, &created);
    let namespace = resource_v1::needs_namespace(info, None)
        .then(|| state.store.get("/namespaces", "", &ns))
        .flatten();
    let admission = resource_v1::admission_causes(info, None, None, &obj, namespace.as_deref());
    validation::validate_create(info, &obj, admission)?;
    let is_crd = info.kind == "CustomResourceDefinition";
    if is_crd {
        crd::prepare(&mut obj, &created);
    }
    if params.dry_run() {
        // Validated and answered as if created (without a resourceVersion); nothing is stored.
        if state.store.exists(&info.storage_key(), &ns, &name) {
            return Err(StatusError::already_exists(
                &info.plural,
                &info.group,
                &name,
            ));
        }
        let format = format_of(headers, params);
        return Ok(object_response(StatusCode::CREATED, format, info, &obj));
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
    let format = format_of(headers, params);
    Ok(object_response(StatusCode::CREATED, format, info, &stored))
}

/// The metadata the server sets on a new object (name from `generateName`, uid, creation time,
/// generation) and clears; the object's name.
fn server_metadata(
    info: &ResourceInfo,
    meta: &mut serde_json::Map<String, Value>,
    created: &str,
) -> Result<String> {
    if meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(StatusError::Internal(
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
            return Err(StatusError::invalid(
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
    Ok(name)
}
