//! Updates: PUT with the resourceVersion precondition and the status subresource rules (and what a
//! kind's status strategy drops, `resource_v1::prepare_status_update`), and PATCH (merge, JSON,
//! strategic) computed on the current object.
//!
//! Every read-modify-write runs inside one store operation so concurrent writers see 409 Conflict
//! exactly as against etcd.

use std::sync::Arc;

use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use super::create::{check_namespace, check_type};
use super::params::decode_object;
use super::read::{format_of, with_gvk};
use super::{object_response, AppState, Call, Params};
use crate::server::convert;
use crate::server::crd;
use crate::server::error::{FieldCause, Result, StatusError};
use crate::server::patch::{self, PatchKind};
use crate::server::resource_v1;
use crate::server::resources::ResourceInfo;
use crate::server::route::ResourceRequest;
use crate::server::store::{Change, Written};
use crate::server::typed;
use crate::server::validation;

/// The current time in the API's RFC 3339 form (second precision, `Z`).
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

/// Whether `a` and `b` are equal but for their `metadata` and `status` (a change of anything
/// else bumps the generation).
fn same_but_metadata_and_status(a: &Value, b: &Value) -> bool {
    let counted = |k: &str| k != "metadata" && k != "status";
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let len = |m: &serde_json::Map<String, Value>| m.keys().filter(|k| counted(k)).count();
    len(a) == len(b)
        && a.iter()
            .filter(|(k, _)| counted(k))
            .all(|(k, v)| b.get(k) == Some(v))
}

/// `current` with the status of `incoming` (none when it has none): what a write of the status
/// subresource stores. Built in `incoming`, whose other fields are mostly equal to the current
/// ones (a status patch is applied to a copy of the object): those are kept, the rest copied from
/// `current`, so that the object is not copied whole.
fn with_status_of(current: &Value, mut incoming: Value) -> Value {
    let status = incoming
        .get_mut("status")
        .map(Value::take)
        .filter(|s| !s.is_null());
    let (Some(kept), Some(fields)) = (current.as_object(), incoming.as_object_mut()) else {
        let mut new = current.clone();
        if let Some(o) = new.as_object_mut() {
            match status {
                Some(s) => o.insert("status".into(), s),
                None => o.remove("status"),
            };
        }
        return new;
    };
    fields.retain(|k, _| k != "status" && kept.contains_key(k));
    for (k, v) in kept {
        if k != "status" && fields.get(k) != Some(v) {
            fields.insert(k.clone(), v.clone());
        }
    }
    if let Some(s) = status {
        fields.insert("status".into(), s);
    }
    incoming
}

/// Computes what an update of `current` to `incoming` stores, applying the status subresource rules,
/// immutable metadata, generation, the resourceVersion precondition and validation; `namespace`
/// is the object's namespace as stored when [`resource_v1::needs_namespace`] asked for it.
pub(super) fn merge_update(
    info: &ResourceInfo,
    sub: Option<&str>,
    current: &Value,
    mut incoming: Value,
    namespace: Option<&Value>,
) -> Result<Change> {
    let name = meta_str(current, "name").to_string();
    let wanted_rv = meta_str(&incoming, "resourceVersion");
    if !wanted_rv.is_empty() && wanted_rv != meta_str(current, "resourceVersion") {
        return Err(StatusError::stale(&info.plural, &info.group, &name));
    }
    if !meta_str(&incoming, "uid").is_empty()
        && meta_str(&incoming, "uid") != meta_str(current, "uid")
    {
        return Err(StatusError::conflict(
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
        let mut new = with_status_of(current, incoming);
        if resource_v1::handles(info) {
            resource_v1::prepare_status_update(info, current, &mut new);
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
    resource_v1::prepare_for_write(info, &mut new, Some(current), &now());
    if info.tracks_generation() && !same_but_metadata_and_status(&new, current) {
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        new["metadata"]["generation"] = json!(generation);
    }
    let admission = resource_v1::admission_causes(info, sub, Some(current), &new, namespace);
    validation::validate_update(info, current, &new, admission)?;
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
        Some(n) if !n.is_empty() && n != url_name => Err(StatusError::BadRequest(format!(
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
    let format = format_of(headers, params);
    object_response(StatusCode::OK, format, info, written.object())
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
    let strict = params.strict_fields();
    let mut dry_result = None;
    // Read before the store is locked for the write (the upstream strategy reads it through a
    // client the same way, outside the update's transaction).
    let namespace = resource_v1::needs_namespace(info, sub)
        .then(|| state.store.get("/namespaces", "", &ns))
        .flatten();
    let written = state.store.modify(
        &info.storage_key(),
        &ns,
        &name,
        || StatusError::not_found(&info.plural, &info.group, &name),
        |current| {
            let incoming = typed::normalise(info, compute(current)?, strict)?;
            let change = merge_update(info, sub, current, incoming, namespace.as_deref())?;
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
pub(super) fn update(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, body) = call.parts();
    let mut obj = decode_object(&req.info, headers, body)?;
    check_type(&req.info, &mut obj)?;
    check_body_name(req, &obj)?;
    check_namespace(req, &mut obj)?;
    let info = &req.info;
    let unconditional = obj["metadata"]["resourceVersion"]
        .as_str()
        .is_none_or(str::is_empty);
    if unconditional && info.requires_resource_version_on_update() {
        let name = req.name.as_deref().unwrap_or_default();
        let cause = FieldCause::invalid(
            "metadata.resourceVersion",
            "0x0",
            "must be specified for an update",
        );
        return Err(StatusError::invalid(
            &info.kind,
            &info.group,
            name,
            vec![cause],
        ));
    }
    let obj = convert::to_storage(info, obj);
    let written = run_update(state, req, params, move |_| Ok(obj))?;
    Ok(finish_write(state, req, params, headers, &written))
}

/// PATCH on an object or its status.
pub(super) fn patch(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, body) = call.parts();
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let kind = PatchKind::from_content_type(content_type)?;
    let info = req.info.clone();
    let written = run_update(state, req, params, |current| {
        let patched = convert::to_storage(
            &info,
            patch::apply(&info, kind, with_gvk(&info, current), body)?,
        );
        if patched["metadata"]["name"] != current["metadata"]["name"] {
            return Err(StatusError::BadRequest(
                "metadata.name may not be changed by a patch".into(),
            ));
        }
        Ok(patched)
    })?;
    Ok(finish_write(state, req, params, headers, &written))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_write_keeps_everything_but_the_status_of_the_current_object() {
        let current = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}});
        let incoming = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "2"}},
            "spec": {"nodeName": "n2"}, "extra": true, "status": {"phase": "Running"}});
        let mut expected = current.clone();
        expected["status"] = json!({"phase": "Running"});
        assert_eq!(with_status_of(&current, incoming), expected);

        let mut cleared = current.clone();
        cleared.as_object_mut().unwrap().remove("status");
        let without = json!({"metadata": {"name": "p"}, "status": null});
        assert_eq!(with_status_of(&current, without), cleared);
        assert_eq!(with_status_of(&current, json!("not an object")), cleared);
    }
}
