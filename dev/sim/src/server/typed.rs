//! Normalisation of built-in kinds through their typed k8s-openapi (v1.30) structs, as the real
//! server decodes into Go types: unknown fields are dropped (or, with `fieldValidation=Strict`,
//! rejected with 400 `BadRequest`) and wrongly typed fields are a 400 `BadRequest`. The
//! `resource.k8s.io/v1` kinds and the 1.34 claim fields of pods go through the types of
//! `super::resource_v1` instead.
//!
//! Custom resources and CRDs are left as they are. Depends only on k8s-openapi and errors.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod};
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimParameters, ResourceClaimTemplate,
    ResourceClass, ResourceClassParameters, ResourceSlice,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::error::{Result, StatusError};
use super::resources::ResourceInfo;

fn round_trip<K: DeserializeOwned + Serialize + k8s_openapi::Resource>(
    obj: Value,
) -> Result<Value> {
    // Decoding from the owned value moves its strings into `K` instead of copying them.
    let typed =
        serde_json::from_value::<K>(obj).map_err(|e| decode_error(K::KIND, K::VERSION, &e))?;
    encode(typed)
}

fn decode_error(kind: &str, version: &str, error: &serde_json::Error) -> StatusError {
    StatusError::BadRequest(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {error}"
    ))
}

fn encode(typed: impl Serialize) -> Result<Value> {
    serde_json::to_value(typed).map_err(|e| StatusError::Internal(format!("encoding object: {e}")))
}

/// Decodes `obj` as `K` and encodes it again (unknown fields dropped); a decode error is the
/// server's 400 for an object of `kind` in `version`.
pub(super) fn decode_as<K: DeserializeOwned + Serialize>(
    kind: &str,
    version: &str,
    obj: &Value,
) -> Result<Value> {
    let typed = K::deserialize(obj).map_err(|e| decode_error(kind, version, &e))?;
    encode(typed)
}

/// Normalises a built-in object in storage form and applies the defaults decoding sets;
/// `strict` rejects unknown fields.
pub fn normalise(info: &ResourceInfo, obj: Value, strict: bool) -> Result<Value> {
    let original = strict.then(|| obj.clone());
    let mut normalised = match (info.group.as_str(), info.kind.as_str()) {
        _ if super::resource_v1::handles(info) => super::resource_v1::normalise(info, &obj)?,
        ("", "Namespace") => round_trip::<Namespace>(obj)?,
        ("", "Node") => round_trip::<Node>(obj)?,
        ("", "Pod") if info.release.serves_v1() => {
            let mut pod = decode_as::<Pod>("Pod", "v1", &obj)?;
            super::resource_v1::pods::keep_claim_fields(&obj, &mut pod)?;
            let on = info.gates.enabled(crate::FeatureGate::DRAExtendedResource);
            super::resource_v1::pods::keep_extended_resource_status(&obj, on, &mut pod)?;
            let health = info.gates.enabled(crate::FeatureGate::ResourceHealthStatus);
            let message = info
                .gates
                .enabled(crate::FeatureGate::ResourceHealthStatusMessage);
            super::resource_v1::pods::keep_allocated_resources_status(
                &obj, health, message, &mut pod,
            )?;
            pod
        }
        ("", "Pod") => round_trip::<Pod>(obj)?,
        // events.k8s.io Events are stored as core Events.
        ("" | "events.k8s.io", "Event") => round_trip::<Event>(obj)?,
        ("", "ConfigMap") => round_trip::<ConfigMap>(obj)?,
        ("coordination.k8s.io", "Lease") => round_trip::<Lease>(obj)?,
        ("resource.k8s.io", "ResourceClass") => round_trip::<ResourceClass>(obj)?,
        ("resource.k8s.io", "ResourceClaim") => round_trip::<ResourceClaim>(obj)?,
        ("resource.k8s.io", "ResourceClaimTemplate") => round_trip::<ResourceClaimTemplate>(obj)?,
        ("resource.k8s.io", "PodSchedulingContext") => round_trip::<PodSchedulingContext>(obj)?,
        ("resource.k8s.io", "ResourceSlice") => round_trip::<ResourceSlice>(obj)?,
        ("resource.k8s.io", "ResourceClaimParameters") => {
            round_trip::<ResourceClaimParameters>(obj)?
        }
        ("resource.k8s.io", "ResourceClassParameters") => {
            round_trip::<ResourceClassParameters>(obj)?
        }
        _ => return Ok(obj),
    };
    super::defaults::apply_decode_defaults(info, &mut normalised);
    if let Some(original) = original {
        let mut unknown = Vec::new();
        dropped_fields(&original, &normalised, "", &mut unknown);
        if !unknown.is_empty() {
            let list = unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(StatusError::BadRequest(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {list}",
                kind = info.kind,
                version = info.version
            )));
        }
    }
    Ok(normalised)
}

/// Paths present (non-null) in `before` but missing from `after`.
fn dropped_fields(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, v) in b {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match a.get(k) {
                    Some(av) => dropped_fields(v, av, &child, out),
                    None if !v.is_null() && !is_empty_container(v) => out.push(child),
                    None => {}
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                dropped_fields(bv, av, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn is_empty_container(v: &Value) -> bool {
    v.as_object().is_some_and(serde_json::Map::is_empty) || v.as_array().is_some_and(Vec::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::resources::builtin_resources;
    use serde_json::json;

    fn pods() -> ResourceInfo {
        builtin_resources()
            .into_iter()
            .find(|r| r.kind == "Pod")
            .unwrap()
    }

    fn pod(extra: &Value) -> Value {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "creationTimestamp": "2026-12-02T09:58:25Z"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {}}]}});
        json_patch::merge(&mut p, extra);
        p
    }

    #[test]
    fn unknown_fields_are_dropped_or_rejected_when_strict() {
        let with_typo =
            pod(&json!({"spec": {"containerz": []}, "metadata": {"labelz": {"a": "b"}}}));
        let normal = normalise(&pods(), with_typo.clone(), false).unwrap();
        assert_eq!(normal, pod(&json!({})));
        match normalise(&pods(), with_typo, true) {
            Err(StatusError::BadRequest(m)) => assert!(m.contains("metadata.labelz"), "{m}"),
            other => panic!("expected a strict decoding error, got {other:?}"),
        }
    }

    #[test]
    fn wrongly_typed_field_is_bad_request() {
        let bad = pod(&json!({"spec": {"containers": "nope"}}));
        assert!(matches!(
            normalise(&pods(), bad, false),
            Err(StatusError::BadRequest(_))
        ));
    }
}
