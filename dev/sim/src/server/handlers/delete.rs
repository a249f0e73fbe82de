//! DELETE: preconditions, finalizers (deletionTimestamp set, object kept until they are gone),
//! propagation policies (Foreground/Orphan add their finalizers as the API server does), graceful
//! pod deletion for pods bound to a node, deletecollection, and namespace termination.
//!
//! Namespace termination runs as a background loop that deletes the namespace's content and
//! removes the namespace once it is empty, as the namespace controller would.

use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use chrono::Utc;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use super::options;
use super::params::decode_body;
use super::read::{format_of, Filter};
use super::write::now;
use super::{json_bytes_response, json_response, object_response, AppState, Call, Params};
use crate::server::crd;
use crate::server::error::{Result, StatusError};
use crate::server::render;
use crate::server::resources::ResourceInfo;
use crate::server::store::{Change, Written};

/// Parsed `DeleteOptions`: from the body when the request has one (its query options are then
/// ignored, as by the API server), from the query otherwise.
#[derive(Debug, Default, Clone)]
struct DeleteOptions {
    uid: Option<String>,
    resource_version: Option<String>,
    grace: Option<i64>,
    propagation: Option<String>,
    /// `orphanDependents` as given (deprecated; `false` asks for a 202 while deletion is pending).
    orphan_dependents: Option<bool>,
    dry_run: bool,
}

impl DeleteOptions {
    fn parse(params: &Params, headers: &HeaderMap, body: &[u8]) -> Result<Self> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Self::from_query(params);
        }
        let body = decode_body(headers, body)?;
        let text = |v: &Value| v.as_str().map(str::to_string);
        let grace = match &body["gracePeriodSeconds"] {
            Value::Null => None,
            v => Some(v.as_i64().ok_or_else(|| {
                StatusError::BadRequest(format!("gracePeriodSeconds: expected an integer, got {v}"))
            })?),
        };
        let dry_run: Vec<&str> = body["dryRun"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap_or_default()).collect())
            .unwrap_or_default();
        let propagation = text(&body["propagationPolicy"]);
        let orphan_dependents = body["orphanDependents"].as_bool();
        options::validate_delete(orphan_dependents, propagation.as_deref(), &dry_run)?;
        Ok(Self {
            uid: body.pointer("/preconditions/uid").and_then(text),
            resource_version: body
                .pointer("/preconditions/resourceVersion")
                .and_then(text),
            grace,
            propagation,
            orphan_dependents,
            dry_run: !dry_run.is_empty(),
        })
    }

    fn from_query(params: &Params) -> Result<Self> {
        let propagation = params.first("propagationPolicy").map(str::to_string);
        let orphan_dependents = params.optional_flag("orphanDependents");
        let dry_run = params.all("dryRun");
        options::validate_delete(orphan_dependents, propagation.as_deref(), &dry_run)?;
        Ok(Self {
            grace: params.int("gracePeriodSeconds")?,
            propagation,
            orphan_dependents,
            dry_run: !dry_run.is_empty(),
            ..Self::default()
        })
    }

    /// The propagation policy, with `orphanDependents` mapped onto it.
    fn policy(&self) -> Option<&str> {
        match (self.propagation.as_deref(), self.orphan_dependents) {
            (Some(p), _) => Some(p),
            (None, Some(true)) => Some("Orphan"),
            (None, _) => None,
        }
    }
}

/// Pods bound to a node that is still running them get a grace period; everything else goes at once.
fn grace_period(info: &ResourceInfo, obj: &Value, requested: Option<i64>) -> i64 {
    if info.kind != "Pod" || !info.group.is_empty() {
        return 0;
    }
    let bound = obj["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let terminal = matches!(
        obj["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if !bound || terminal {
        return 0;
    }
    // A negative period counts as one second.
    let grace = requested
        .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30);
    if grace < 0 {
        1
    } else {
        grace
    }
}

fn decide(info: &ResourceInfo, current: &Value, opts: &DeleteOptions) -> Result<Change> {
    let name = current["metadata"]["name"].as_str().unwrap_or_default();
    let meta = &current["metadata"];
    let preconditions = [
        ("UID", "uid", &opts.uid),
        ("ResourceVersion", "resourceVersion", &opts.resource_version),
    ];
    for (label, field, wanted) in preconditions {
        let Some(wanted) = wanted else { continue };
        let actual = meta[field].as_str();
        if actual != Some(wanted.as_str()) {
            let why = format!(
                "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {}",
                actual.unwrap_or_default()
            );
            return Err(StatusError::conflict(&info.plural, &info.group, name, &why));
        }
    }
    let mut finalizers: Vec<Value> = meta["finalizers"].as_array().cloned().unwrap_or_default();
    // An explicit policy replaces the garbage collector's finalizers; without one they stay.
    let mut finalizers_changed = false;
    if let Some(policy) = opts.policy() {
        let before = finalizers.clone();
        finalizers.retain(|x| x != "foregroundDeletion" && x != "orphan");
        match policy {
            "Foreground" => finalizers.push(json!("foregroundDeletion")),
            "Orphan" => finalizers.push(json!("orphan")),
            _ => {}
        }
        finalizers_changed = finalizers != before;
    }
    let grace = grace_period(info, current, opts.grace);
    let already = meta["deletionTimestamp"].is_string();
    if finalizers.is_empty() && grace == 0 {
        return Ok(Change::Remove);
    }
    // Copied only when the object stays (a removal is the common case).
    let mut new = current.clone();
    if finalizers_changed {
        match new["metadata"].as_object_mut() {
            Some(m) if finalizers.is_empty() => {
                m.remove("finalizers");
            }
            _ => new["metadata"]["finalizers"] = Value::Array(finalizers),
        }
    }
    if already {
        let current_grace = meta["deletionGracePeriodSeconds"].as_i64().unwrap_or(0);
        if grace < current_grace {
            new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            new["metadata"]["deletionTimestamp"] = json!(deadline(grace));
        }
        return Ok(Change::Put(new));
    }
    new["metadata"]["deletionTimestamp"] = json!(deadline(grace));
    new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
    if info.kind == "Namespace" && info.group.is_empty() {
        new["status"]["phase"] = json!("Terminating");
    }
    Ok(Change::Put(new))
}

fn deadline(grace: i64) -> String {
    if grace == 0 {
        now()
    } else {
        (Utc::now() + chrono::Duration::seconds(grace))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }
}

fn delete_one(
    state: &AppState,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Written> {
    let mut opts = opts.clone();
    if info.kind == "Namespace"
        && info.group.is_empty()
        && ["default", "kube-system", "kube-public"].contains(&name)
    {
        return Err(StatusError::Forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        )));
    }
    if info.kind == "Namespace" && info.group.is_empty() {
        // The namespace keeps its `kubernetes` finalizer in spec; termination is driven by a loop.
        opts.grace = Some(0);
    }
    let mut dry_result = None;
    let written = state.store.modify(
        &info.storage_key(),
        ns,
        name,
        || StatusError::not_found(&info.plural, &info.group, name),
        |current| {
            if opts.dry_run {
                // Answered as if applied; nothing is stored.
                dry_result = Some(match decide(info, current, &opts)? {
                    Change::Put(new) => Written::Stored(Arc::new(new)),
                    Change::Remove => Written::Removed(current.clone()),
                    Change::Keep => Written::Unchanged(current.clone()),
                });
                return Ok(Change::Keep);
            }
            if info.kind == "Namespace" && info.group.is_empty() {
                // Terminating first; the finalize loop removes it when empty.
                let mut change = decide(info, current, &opts)?;
                if let Change::Remove = change {
                    let mut new = (**current).clone();
                    if !new["metadata"]["deletionTimestamp"].is_string() {
                        new["metadata"]["deletionTimestamp"] = json!(now());
                        new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                    }
                    new["status"]["phase"] = json!("Terminating");
                    change = Change::Put(new);
                }
                return Ok(change);
            }
            decide(info, current, &opts)
        },
    )?;
    if let Some(dry) = dry_result {
        return Ok(dry);
    }
    if info.kind == "CustomResourceDefinition" {
        if let Written::Removed(o) = &written {
            crd::unregister(&state.store, o);
        }
    }
    Ok(written)
}

/// DELETE one object.
pub(super) fn delete(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, body) = call.parts();
    let info = &req.info;
    let opts = DeleteOptions::parse(params, headers, body)?;
    let name = req.name.clone().unwrap_or_default();
    let ns = req.namespace.clone().unwrap_or_default();
    let written = delete_one(state, info, &ns, &name, &opts)?;
    let format = format_of(headers, params);
    // A delete that completed answers the object for registries that return it, a Status
    // otherwise; one that only marked the object (finalizers, grace period) answers the object,
    // with 202 when `orphanDependents=false` was given (generic registry `Store.Delete`,
    // endpoints `handlers/delete.go`).
    Ok(match &written {
        Written::Removed(o) if !info.return_deleted_object => {
            let mut details =
                json!({"name": name, "kind": info.plural, "uid": o["metadata"]["uid"]});
            if !info.group.is_empty() {
                details["group"] = json!(info.group);
            }
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details});
            json_response(StatusCode::OK, &status)
        }
        Written::Removed(o) => object_response(StatusCode::OK, format, info, o),
        pending => {
            let code = if opts.orphan_dependents == Some(false) {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            object_response(code, format, info, pending.object())
        }
    })
}

/// DELETE on a collection: deletes every object matching the selectors.
pub(super) fn delete_collection(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, body) = call.parts();
    let info = &req.info;
    options::validate_list(params, false)?;
    let opts = DeleteOptions::parse(params, headers, body)?;
    let filter = Filter::from_request(req, params)?;
    let (all, _) = state
        .store
        .list(&info.storage_key(), filter.namespace.as_deref(), None);
    let mut deleted = Vec::new();
    for obj in all.iter().filter(|o| filter.matches(o)) {
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        match delete_one(state, info, ns, name, &opts) {
            Ok(w) => deleted.push(w.object().clone()),
            Err(StatusError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let rv = state.store.current_rv();
    Ok(json_bytes_response(
        StatusCode::OK,
        render::list(format_of(headers, params), info, &deleted, rv, None, None),
    ))
}

/// Background loop: empties terminating namespaces and removes them once empty.
pub(crate) async fn finalize_namespaces(state: Arc<AppState>) {
    let mut closing = state.closing.subscribe();
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = closing.changed() => return,
        }
        let (namespaces, _) = state.store.list("/namespaces", None, None);
        for ns in namespaces
            .iter()
            .filter(|n| n["metadata"]["deletionTimestamp"].is_string())
        {
            finalize_one(&state, ns["metadata"]["name"].as_str().unwrap_or_default());
        }
    }
}

fn finalize_one(state: &AppState, ns: &str) {
    let registry = state.store.registry();
    let keys = state.store.keys_with_objects_in(ns);
    let opts = DeleteOptions {
        propagation: Some("Background".into()),
        ..DeleteOptions::default()
    };
    let mut left = 0;
    for key in keys {
        let Some((group, plural)) = key.split_once('/') else {
            continue;
        };
        let Some(info) = registry.find_any_version(group, plural) else {
            continue;
        };
        let (objs, _) = state.store.list(&key, Some(ns), None);
        for obj in objs {
            left += 1;
            if obj["metadata"]["deletionTimestamp"].is_string() {
                continue;
            }
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            if let Err(error) = delete_one(state, &info, ns, name, &opts) {
                tracing::debug!(%error, namespace = ns, name, "Namespace content deletion failed");
            }
        }
    }
    if left == 0 {
        let _ = state
            .store
            .modify("/namespaces", "", ns, StatusError::no_route, |_| {
                Ok(Change::Remove)
            });
    }
}
