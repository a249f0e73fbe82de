//! `resource.k8s.io` as a Kubernetes 1.34 to 1.37 API server serves it (the `v1` generation):
//! the resources, how their objects are decoded into the shared model ([`decode`]), converted
//! between the served versions and the stored `v1` shape ([`convert`]), stripped of the fields
//! of disabled feature gates ([`gated`]), defaulted ([`defaults`]) and validated ([`validate`]),
//! what a claim's status write drops ([`claim_status`]), and the 1.34 shape of pods' claims
//! ([`pods`]).
//!
//! The server's generic handlers call the entry points here for objects of group
//! `resource.k8s.io` (every version) and for pods when the server plays a `v1` release.

pub(crate) mod admin_access;
mod claim_status;
mod convert;
mod decode;
mod defaults;
mod gated;
pub(crate) mod pods;
mod validate;

use dra_types::resource_v1::{API_VERSION, GROUP, VERSION};
use serde_json::Value;

use super::error::{FieldCause, Result};
use super::resources::ResourceInfo;

/// Whether `info` is one of the `resource.k8s.io` resources of a `v1`-generation server, handled
/// here (every version of them is stored as `v1`).
pub fn handles(info: &ResourceInfo) -> bool {
    info.group == GROUP && info.release.serves_v1()
}

/// Whether objects of `info` have the `v1` shape in their own version, so that the `v1` model
/// describes them (its `OpenAPI` schema, for one).
pub fn shaped_like_v1(info: &ResourceInfo) -> bool {
    handles(info) && convert::shaped_like_v1(&info.version)
}

/// Whether objects of `info` differ from their stored form by more than `apiVersion`.
fn converts(info: &ResourceInfo) -> bool {
    handles(info) && info.version != VERSION
}

/// The stored (`v1`) form of `incoming`, written through `info`'s version.
pub fn to_storage(info: &ResourceInfo, incoming: Value) -> Value {
    if !converts(info) {
        return incoming;
    }
    let mut stored = convert::to_v1(&info.kind, &info.version, incoming);
    if stored.is_object() {
        stored["apiVersion"] = Value::from(API_VERSION);
    }
    stored
}

/// The stored object as a client of `info`'s version sees it (`apiVersion` is the caller's).
pub fn from_storage(info: &ResourceInfo, stored: &Value) -> Value {
    if converts(info) {
        convert::from_v1(&info.kind, &info.version, stored)
    } else {
        stored.clone()
    }
}

/// What the registry's strategy does before validating a create (`old` unset) or an update:
/// drops the fields of `new` whose feature gates are off unless `old` uses them already, and
/// stamps new taints with the time (`now`, RFC 3339) they were added.
pub fn prepare_for_write(info: &ResourceInfo, new: &mut Value, old: Option<&Value>, now: &str) {
    if handles(info) {
        gated::drop_disabled_fields(&info.kind, info.gates, new, old);
        defaults::taint_times(&info.kind, new, old, now);
    }
}

/// The resources, in the shape of the registry's built-in table:
/// `(plural, kind, namespaced, status subresource)`. Which of them a version serves is the
/// release table's (`crate::release`).
pub const RESOURCES: [(&str, &str, bool, bool); 5] = [
    ("deviceclasses", "DeviceClass", false, false),
    ("devicetaintrules", "DeviceTaintRule", false, true),
    ("resourceclaims", "ResourceClaim", true, true),
    (
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        true,
        false,
    ),
    ("resourceslices", "ResourceSlice", false, false),
];

/// Decodes `obj` as its kind and encodes it again: unknown and disabled fields are dropped,
/// wrongly typed ones are a 400.
pub fn normalise(info: &ResourceInfo, obj: &Value) -> Result<Value> {
    decode::normalise(&info.kind, obj)
}

/// Applies the defaults of the kind (on every write, as decoding does).
pub fn apply_defaults(info: &ResourceInfo, obj: &mut Value) {
    match info.kind.as_str() {
        "ResourceClaim" => defaults::claim_spec(&mut obj["spec"]),
        "ResourceClaimTemplate" => defaults::claim_spec(&mut obj["spec"]["spec"]),
        _ => {}
    }
}

/// The rules of a new object of the kind.
pub fn create_causes(info: &ResourceInfo, obj: &Value) -> Vec<FieldCause> {
    match info.kind.as_str() {
        "DeviceClass" => validate::device_class(obj),
        "ResourceClaim" => {
            let mut causes = validate::claim_spec("spec", &obj["spec"]);
            causes.extend(validate::claim_status(None, obj));
            causes
        }
        "ResourceClaimTemplate" => validate::claim_spec("spec.spec", &obj["spec"]["spec"]),
        "ResourceSlice" => validate::resource_slice(obj),
        "DeviceTaintRule" => validate::device_taint_rule(obj, None),
        _ => Vec::new(),
    }
}

/// The rules of an update from `old` to `new` (spec and status rules of the new object, and
/// what may not change).
pub fn update_causes(info: &ResourceInfo, old: &Value, new: &Value) -> Vec<FieldCause> {
    match info.kind.as_str() {
        "DeviceClass" => validate::device_class(new),
        "ResourceClaim" => {
            let mut causes = Vec::new();
            if old.get("spec") == new.get("spec") {
                causes.extend(validate::claim_spec("spec", &new["spec"]));
            } else {
                causes.push(FieldCause::immutable("spec"));
            }
            causes.extend(validate::claim_status(Some(old), new));
            causes
        }
        "ResourceClaimTemplate" if old.get("spec") != new.get("spec") => {
            vec![FieldCause::immutable("spec")]
        }
        "ResourceSlice" => {
            let mut causes = validate::resource_slice(new);
            causes.extend(validate::resource_slice_update(old, new));
            causes
        }
        "DeviceTaintRule" => validate::device_taint_rule(new, Some(old)),
        _ => Vec::new(),
    }
}

/// What a write of the status subresource of `old` stores of `new`: for a claim, the
/// `status.devices` entries of devices its allocation no longer holds are dropped
/// ([`claim_status`]).
pub fn prepare_status_update(info: &ResourceInfo, old: &Value, new: &mut Value) {
    if info.kind == "ResourceClaim" {
        claim_status::drop_deallocated_devices(old, new);
    }
}

/// Whether a write of `info` (`sub`resource) must know the object's namespace to be validated:
/// claims and templates, whose admin access depends on the namespace's label.
pub fn needs_namespace(info: &ResourceInfo, sub: Option<&str>) -> bool {
    handles(info)
        && match info.kind.as_str() {
            "ResourceClaim" => true,
            "ResourceClaimTemplate" => sub.is_none(),
            _ => false,
        }
}

/// The causes the strategy's admission checks add before validation, for a create (`old`
/// unset) or an update of `sub`resource: admin access outside an admin namespace.
pub fn admission_causes(
    info: &ResourceInfo,
    sub: Option<&str>,
    old: Option<&Value>,
    new: &Value,
    namespace: admin_access::Namespace<'_>,
) -> Vec<FieldCause> {
    if !handles(info) {
        return Vec::new();
    }
    match (old, sub) {
        (None, _) => admin_access::create_causes(&info.kind, new, namespace),
        (Some(old), Some("status")) if info.kind == "ResourceClaim" => {
            admin_access::status_causes(old, new, namespace)
        }
        _ => Vec::new(),
    }
}

/// Whether the kind keeps `metadata.generation` (its create sets 1, a spec change adds 1).
pub fn tracks_generation(kind: &str) -> bool {
    matches!(kind, "DeviceClass" | "DeviceTaintRule" | "ResourceSlice")
}
