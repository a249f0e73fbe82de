//! `CustomResourceDefinitions`: validation of the definition, the status a real server reports once
//! names are accepted and the CRD is established, and (un)registering the custom resource so it is
//! served and discoverable.
//!
//! Schemas are stored but not enforced (no pruning, no `OpenAPI` validation). Depends on the registry
//! and store only through the functions called here.

use serde_json::{json, Value};

use super::error::FieldCause;
use super::resources::ResourceInfo;
use super::store::Store;

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// Field causes for an invalid CRD.
pub fn validate(crd: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    if group.is_empty() {
        causes.push(FieldCause::required("spec.group", ""));
    } else if !group.contains('.') {
        causes.push(FieldCause::invalid(
            "spec.group",
            group,
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        causes.push(FieldCause::required("spec.names.plural", ""));
    }
    if s(crd, "/spec/names/kind").is_empty() {
        causes.push(FieldCause::required("spec.names.kind", ""));
    }
    let name = s(crd, "/metadata/name");
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(FieldCause::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = s(crd, "/spec/scope");
    if !matches!(scope, "Namespaced" | "Cluster") {
        causes.push(FieldCause {
            reason: "FieldValueNotSupported",
            field: "spec.scope".into(),
            message: format!(
                "Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""
            ),
        });
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(FieldCause::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    } else if versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count()
        != 1
    {
        causes.push(FieldCause::invalid(
            "spec.versions",
            "",
            "must have exactly one version marked as storage version",
        ));
    }
    causes
}

/// Defaults names and sets the status of a newly accepted, established CRD.
pub fn prepare(crd: &mut Value, now: &str) {
    let kind = s(crd, "/spec/names/kind").to_string();
    if let Some(names) = crd
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    {
        names
            .entry("singular")
            .or_insert_with(|| json!(kind.to_lowercase()));
        names
            .entry("listKind")
            .or_insert_with(|| json!(format!("{kind}List")));
    }
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    let condition = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    crd["status"] = json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": crd["spec"]["names"].clone(),
        "storedVersions": storage,
    });
}

/// The resources a CRD declares (one per served version).
pub fn resources_of(crd: &Value) -> Vec<ResourceInfo> {
    let names = &crd["spec"]["names"];
    let strings = |v: &Value| {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool() != Some(false))
        .map(|v| ResourceInfo {
            group: s(crd, "/spec/group").to_string(),
            version: v["name"].as_str().unwrap_or_default().to_string(),
            plural: names["plural"].as_str().unwrap_or_default().to_string(),
            singular: names["singular"]
                .as_str()
                .map_or_else(|| kind.to_lowercase(), str::to_string),
            kind: kind.clone(),
            namespaced: s(crd, "/spec/scope") == "Namespaced",
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            status: v.pointer("/subresources/status").is_some(),
            binding: false,
            custom: true,
            return_deleted_object: false,
            release: crate::KubernetesVersion::default(),
            gates: crate::FeatureGates::default(),
        })
        .collect()
}

/// Serves the resources of a (new or changed) CRD.
pub fn register(store: &Store, crd: &Value) {
    let group = s(crd, "/spec/group").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    let infos = resources_of(crd);
    store.update_registry(|reg| {
        reg.remove(&group, &plural);
        for info in infos {
            reg.insert(info);
        }
    });
}

/// Stops serving a removed CRD's resources and deletes its custom objects.
pub fn unregister(store: &Store, crd: &Value) {
    let group = s(crd, "/spec/group").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    store.update_registry(|reg| reg.remove(&group, &plural));
    store.remove_all(&format!("{group}/{plural}"));
}
