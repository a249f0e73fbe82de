//! Validation of created and updated objects: names, labels, metadata rules, and the per-kind rules
//! that matter to DRA controllers (immutable `ResourceClaim` spec, claim status invariants, pod spec
//! update limits).
//!
//! Pure functions over `serde_json::Value`; no store or HTTP dependencies.

use serde_json::Value;

use super::error::{FieldCause, Result, StatusError};
use super::resources::ResourceInfo;

pub(crate) const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub(crate) const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
pub(crate) const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Whether `s` is a DNS-1123 label.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a DNS-1123 subdomain.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

pub(crate) fn is_qualified_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

fn name_causes(info: &ResourceInfo, name: &str, field: &str) -> Vec<FieldCause> {
    if info.kind == "Namespace" {
        if name.len() > 63 {
            return vec![FieldCause::invalid(
                field,
                name,
                "must be no more than 63 characters",
            )];
        }
        if !is_dns_label(name) {
            return vec![FieldCause::invalid(field, name, LABEL_MSG)];
        }
        return Vec::new();
    }
    if info.custom {
        if name == "." || name == ".." {
            return vec![FieldCause::invalid(
                field,
                name,
                &format!("may not be '{name}'"),
            )];
        }
        if name.contains('/') || name.contains('%') {
            return vec![FieldCause::invalid(
                field,
                name,
                "may not contain '/' or '%'",
            )];
        }
        return Vec::new();
    }
    if name.len() > 253 {
        return vec![FieldCause::invalid(
            field,
            name,
            "must be no more than 253 characters",
        )];
    }
    if !is_dns_subdomain(name) {
        return vec![FieldCause::invalid(field, name, SUBDOMAIN_MSG)];
    }
    Vec::new()
}

fn label_causes(meta: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            causes.extend(key_causes(k, "metadata.labels"));
            match v.as_str() {
                Some(s) if s.is_empty() || is_qualified_part(s) => {}
                Some(s) => causes.push(FieldCause::invalid("metadata.labels", s, LABEL_VALUE_MSG)),
                None => causes.push(FieldCause::invalid(
                    "metadata.labels",
                    &v.to_string(),
                    "must be a string",
                )),
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        for (k, v) in annotations {
            causes.extend(key_causes(k, "metadata.annotations"));
            if !v.is_string() {
                causes.push(FieldCause::invalid(
                    "metadata.annotations",
                    &v.to_string(),
                    "must be a string",
                ));
            }
        }
    }
    causes
}

/// The causes of a label key or any other qualified name (`metav1validation.ValidateLabelName`).
pub(crate) fn key_causes(key: &str, field: &str) -> Vec<FieldCause> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut causes = Vec::new();
    if let Some(p) = prefix {
        if !is_dns_subdomain(p) || p.is_empty() {
            causes.push(FieldCause::invalid(
                field,
                key,
                &format!("prefix part {SUBDOMAIN_MSG}"),
            ));
        }
    }
    if name.is_empty() {
        causes.push(FieldCause::invalid(
            field,
            key,
            "name part must be non-empty",
        ));
    }
    if !is_qualified_part(name) {
        causes.push(FieldCause::invalid(field, key, QUALIFIED_MSG));
    }
    causes
}

/// Validation of a new object (after defaulting); `admission` are the causes of the strategy's
/// own checks, reported first.
pub fn validate_create(info: &ResourceInfo, obj: &Value, admission: Vec<FieldCause>) -> Result<()> {
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let mut causes = admission;
    causes.extend(name_causes(info, name, "metadata.name"));
    causes.extend(label_causes(meta));
    causes.extend(kind_causes(info, obj));
    if super::resource_v1::handles(info) {
        causes.extend(super::resource_v1::create_causes(info, obj));
    }
    if info.kind == "CustomResourceDefinition" {
        causes.extend(super::crd::validate(obj));
    }
    finish(info, name, causes)
}

/// Validation of an update; `old` is the stored object, `new` the object about to be stored,
/// `admission` the causes of the strategy's own checks, reported first.
pub fn validate_update(
    info: &ResourceInfo,
    old: &Value,
    new: &Value,
    admission: Vec<FieldCause>,
) -> Result<()> {
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    let mut causes = admission;
    causes.extend(label_causes(&new["metadata"]));
    causes.extend(kind_causes(info, new));
    if old["metadata"]["deletionTimestamp"].is_string() {
        let old_f = string_list(&old["metadata"]["finalizers"]);
        if string_list(&new["metadata"]["finalizers"])
            .iter()
            .any(|f| !old_f.contains(f))
        {
            causes.push(FieldCause::forbidden(
                "metadata.finalizers",
                "no new finalizers can be added if the object is being deleted",
            ));
        }
    }
    match info.kind.as_str() {
        _ if super::resource_v1::handles(info) => {
            causes.extend(super::resource_v1::update_causes(info, old, new));
        }
        "ResourceClaim" => {
            if old.get("spec") != new.get("spec") {
                causes.push(FieldCause::immutable("spec"));
            }
            causes.extend(claim_status_causes(old, new));
        }
        "ResourceClaimTemplate" if old.get("spec") != new.get("spec") => {
            causes.push(FieldCause::immutable("spec"));
        }
        "Pod" => causes.extend(pod_update_causes(old, new)),
        "ResourceSlice" => {
            for f in ["nodeName", "driverName"] {
                if old.get(f) != new.get(f) {
                    causes.push(FieldCause::immutable(f));
                }
            }
        }
        _ => {}
    }
    finish(info, name, causes)
}

fn finish(info: &ResourceInfo, name: &str, causes: Vec<FieldCause>) -> Result<()> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(StatusError::invalid(&info.kind, &info.group, name, causes))
    }
}

fn string_list(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn kind_causes(info: &ResourceInfo, obj: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    if info.kind == "Pod" && info.release.serves_v1() {
        causes.extend(super::resource_v1::pods::claim_causes(obj));
    }
    match info.kind.as_str() {
        // The v1 kinds have their own create and update rules.
        _ if super::resource_v1::handles(info) => {}
        "Pod" => {
            let containers = obj.pointer("/spec/containers").and_then(Value::as_array);
            match containers {
                Some(c) if !c.is_empty() => {
                    for (i, c) in c.iter().enumerate() {
                        let n = c["name"].as_str().unwrap_or_default();
                        if !is_dns_label(n) {
                            causes.push(FieldCause::invalid(
                                format!("spec.containers[{i}].name"),
                                n,
                                LABEL_MSG,
                            ));
                        }
                        if c["image"].as_str().is_none_or(str::is_empty) {
                            causes.push(FieldCause::required(
                                format!("spec.containers[{i}].image"),
                                "",
                            ));
                        }
                    }
                }
                _ => causes.push(FieldCause::required("spec.containers", "")),
            }
        }
        "ResourceClaim" => {
            if obj
                .pointer("/spec/resourceClassName")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                causes.push(FieldCause::required("spec.resourceClassName", ""));
            }
            let mode = obj
                .pointer("/spec/allocationMode")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !matches!(mode, "Immediate" | "WaitForFirstConsumer") {
                causes.push(FieldCause {
                    reason: "FieldValueNotSupported",
                    field: "spec.allocationMode".into(),
                    message: format!("Unsupported value: {mode:?}: supported values: \"Immediate\", \"WaitForFirstConsumer\""),
                });
            }
        }
        "ResourceClass" if obj["driverName"].as_str().is_none_or(str::is_empty) => {
            causes.push(FieldCause::required("driverName", ""));
        }
        _ => {}
    }
    causes
}

fn claim_status_causes(old: &Value, new: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let (os, ns) = (&old["status"], &new["status"]);
    let reserved = ns["reservedFor"].as_array().cloned().unwrap_or_default();
    let allocation = ns.get("allocation").filter(|a| !a.is_null());
    let uids = |list: &[Value]| {
        list.iter()
            .filter_map(|r| r["uid"].as_str().map(str::to_string))
            .collect::<Vec<_>>()
    };
    let new_uids = uids(&reserved);
    if reserved.len() > 32 {
        causes.push(FieldCause {
            reason: "FieldValueTooMany",
            field: "status.reservedFor".into(),
            message: format!("Too many: {}: must have at most 32 items", reserved.len()),
        });
    }
    for (i, u) in new_uids.iter().enumerate() {
        if new_uids[..i].contains(u) {
            causes.push(FieldCause {
                reason: "FieldValueDuplicate",
                field: format!("status.reservedFor[{i}]"),
                message: format!("Duplicate value: {u:?}"),
            });
        }
    }
    if !reserved.is_empty() {
        match allocation {
            None => causes.push(FieldCause::forbidden(
                "status.reservedFor",
                "may not be specified when `allocated` is not set",
            )),
            Some(a) => {
                if !a["shareable"].as_bool().unwrap_or(false) && reserved.len() > 1 {
                    causes.push(FieldCause::forbidden(
                        "status.reservedFor",
                        "may not be reserved more than once",
                    ));
                }
                let deleting = new["metadata"]["deletionTimestamp"].is_string();
                if deleting || ns["deallocationRequested"].as_bool().unwrap_or(false) {
                    let old_uids =
                        uids(os["reservedFor"].as_array().map_or(&[][..], Vec::as_slice));
                    if new_uids.iter().any(|u| !old_uids.contains(u)) {
                        causes.push(FieldCause::forbidden(
                            "status.reservedFor",
                            "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                        ));
                    }
                }
            }
        }
    }
    let old_alloc = os.get("allocation").filter(|a| !a.is_null());
    if let (Some(o), Some(n)) = (old_alloc, allocation) {
        if o != n {
            causes.push(FieldCause::immutable("status.allocation"));
        }
    }
    if allocation.is_some() && ns["driverName"].as_str().is_none_or(str::is_empty) {
        causes.push(FieldCause::required(
            "status.driverName",
            "must be specified when `allocation` is set",
        ));
    }
    let old_dealloc = os["deallocationRequested"].as_bool().unwrap_or(false);
    let new_dealloc = ns["deallocationRequested"].as_bool().unwrap_or(false);
    if old_dealloc && !new_dealloc && allocation.is_some() {
        causes.push(FieldCause::forbidden(
            "status.deallocationRequested",
            "may not be cleared when `allocation` is set",
        ));
    }
    causes
}

/// Pod spec fields that an update may change (everything else is immutable after creation).
fn pod_spec_mutable_view(spec: &Value) -> Value {
    let mut view = spec.clone();
    if let Some(obj) = view.as_object_mut() {
        obj.remove("activeDeadlineSeconds");
        obj.remove("tolerations");
        obj.remove("schedulingGates");
        obj.remove("terminationGracePeriodSeconds");
        for list in ["containers", "initContainers"] {
            if let Some(cs) = obj.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
    }
    view
}

fn pod_update_causes(old: &Value, new: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    // Most pod writes (status, metadata) leave the spec as it was: nothing to compare then.
    if old["spec"] != new["spec"]
        && pod_spec_mutable_view(&old["spec"]) != pod_spec_mutable_view(&new["spec"])
    {
        causes.push(FieldCause::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
    let old_gates = old
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let new_gates = new
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if new_gates.iter().any(|g| !old_gates.contains(g)) {
        causes.push(FieldCause::forbidden(
            "spec.schedulingGates",
            "only deletion is allowed, but found new scheduling gate",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_rules_accept_kubernetes_names_and_reject_others() {
        assert!(is_dns_subdomain("my-pod.example"));
        assert!(!is_dns_subdomain("Bad_Name"));
        assert!(!is_dns_subdomain("-x"));
        assert!(!is_dns_label("a.b"));
        assert!(is_dns_label("kube-system"));
    }

    #[test]
    fn a_pod_update_may_change_its_status_and_image_but_not_the_rest_of_its_spec() {
        let old = serde_json::json!({
            "spec": {"containers": [{"name": "c", "image": "a"}], "nodeName": ""},
            "status": {"phase": "Pending"},
        });
        let mut status_only = old.clone();
        status_only["status"]["phase"] = "Running".into();
        assert!(pod_update_causes(&old, &status_only).is_empty());
        let mut image = old.clone();
        image["spec"]["containers"][0]["image"] = "b".into();
        assert!(pod_update_causes(&old, &image).is_empty());
        let mut renamed = old.clone();
        renamed["spec"]["containers"][0]["name"] = "d".into();
        let causes = pod_update_causes(&old, &renamed);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec");
    }

    #[test]
    fn label_keys_may_have_a_dns_prefix() {
        assert!(key_causes("example.com/app", "f").is_empty());
        assert!(!key_causes("Bad Key", "f").is_empty());
    }
}
