//! `resource.k8s.io/v1` as a Kubernetes 1.34 API server serves it (`v1`): the four
//! resources, how their objects are decoded into the shared model ([`decode`]), their defaults
//! ([`defaults`]) and validation ([`validate`]), and the 1.34 shape of pods' claims ([`pods`]).
//!
//! The server's generic handlers call the entry points here for objects of group
//! `resource.k8s.io`, version `v1`, and for pods when the server plays 1.34.

mod decode;
mod defaults;
pub(crate) mod pods;
mod validate;

use dra_types::resource_v1::{GROUP, VERSION};
use serde_json::Value;

use super::error::{FieldCause, Result};
use super::resources::ResourceInfo;

/// Whether `info` is one of the `resource.k8s.io/v1` resources handled here.
pub fn handles(info: &ResourceInfo) -> bool {
    info.group == GROUP && info.version == VERSION
}

/// The four resources, in the shape of the registry's built-in table:
/// `(plural, kind, namespaced, status subresource)`.
pub const RESOURCES: [(&str, &str, bool, bool); 4] = [
    ("deviceclasses", "DeviceClass", false, false),
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
        _ => Vec::new(),
    }
}

/// Whether the kind keeps `metadata.generation` (its create sets 1, a spec change adds 1).
pub fn tracks_generation(kind: &str) -> bool {
    matches!(kind, "DeviceClass" | "ResourceSlice")
}
