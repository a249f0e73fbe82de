//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the strategic merge patch
//! of Kubernetes for built-in kinds (lists merged by their patch merge keys, `$patch`,
//! `$deleteFromPrimitiveList`, `$setElementOrder` and `$retainKeys` directives).
//!
//! Pure functions over `serde_json::Value`; no store or HTTP dependencies.

use serde_json::{Map, Value};

use super::error::{Result, StatusError};
use super::resources::ResourceInfo;

/// The patch formats the server understands, from the request Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
}

impl PatchKind {
    /// Maps a Content-Type to a patch kind; 415 for anything else (server-side apply included).
    pub fn from_content_type(content_type: &str) -> Result<Self> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            other => Err(StatusError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {other:?})"
            ))),
        }
    }
}

/// The message of kube-apiserver's 422 for a JSON patch that does not apply
/// (`NewGenericServerResponse(422, ...)` without a resource).
pub const JSON_PATCH_NOT_APPLIED: &str =
    "the server rejected our request due to an error in our request";

/// Applies a patch body to `current` and returns the patched object.
pub fn apply(info: &ResourceInfo, kind: PatchKind, current: Value, body: &[u8]) -> Result<Value> {
    let mut doc = current;
    match kind {
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| StatusError::BadRequest(format!("error decoding patch: {e}")))?;
            // kube-apiserver answers any operation that does not apply (a failed `test`
            // included) with its generic 422: no resource, no name, no cause, and not the
            // patch library's own text.
            json_patch::patch(&mut doc, &ops.0).map_err(|e| {
                tracing::debug!(kind = %info.kind, name = %name_of(&doc), error = %e, "JSON patch did not apply");
                StatusError::Invalid {
                    message: JSON_PATCH_NOT_APPLIED.to_owned(),
                    details: (String::new(), String::new(), String::new()),
                    causes: Vec::new(),
                }
            })?;
        }
        PatchKind::Merge => {
            let patch = parse_object(body)?;
            json_patch::merge(&mut doc, &patch);
        }
        PatchKind::Strategic => {
            if info.custom {
                return Err(StatusError::UnsupportedMediaType(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
                ));
            }
            let patch = parse_object(body)?;
            strategic_merge(&info.kind, &mut doc, &patch);
        }
    }
    if !doc.is_object() {
        return Err(StatusError::BadRequest(
            "the patched object is not a JSON object".into(),
        ));
    }
    Ok(doc)
}

fn name_of(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn parse_object(body: &[u8]) -> Result<Value> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| StatusError::BadRequest(format!("error decoding patch: {e}")))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(StatusError::BadRequest(
            "error decoding patch: a merge patch must be a JSON object".into(),
        ))
    }
}

/// How a list at a path merges under strategic merge patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListMerge {
    /// Replace the whole list (the default).
    Replace,
    /// Merge items that share the value of this key.
    ByKey(&'static str),
    /// Union of primitive values.
    Primitive,
}

/// Patch merge keys of the built-in kinds served here, by dotted path (list items add no segment).
fn list_strategy(kind: &str, path: &str) -> ListMerge {
    const CONTAINER_LISTS: [&str; 3] = [
        "spec.containers",
        "spec.initContainers",
        "spec.ephemeralContainers",
    ];
    match path {
        "metadata.finalizers" => return ListMerge::Primitive,
        "metadata.ownerReferences" => return ListMerge::ByKey("uid"),
        _ => {}
    }
    match kind {
        "Pod" => {
            if CONTAINER_LISTS.contains(&path) {
                return ListMerge::ByKey("name");
            }
            if let Some(rest) = CONTAINER_LISTS
                .iter()
                .find_map(|p| path.strip_prefix(p).and_then(|r| r.strip_prefix('.')))
            {
                return match rest {
                    "env" => ListMerge::ByKey("name"),
                    "ports" => ListMerge::ByKey("containerPort"),
                    "volumeMounts" => ListMerge::ByKey("mountPath"),
                    "volumeDevices" => ListMerge::ByKey("devicePath"),
                    _ => ListMerge::Replace,
                };
            }
            match path {
                "spec.volumes"
                | "spec.imagePullSecrets"
                | "spec.resourceClaims"
                | "spec.schedulingGates" => ListMerge::ByKey("name"),
                "spec.hostAliases" | "status.podIPs" => ListMerge::ByKey("ip"),
                "status.conditions" => ListMerge::ByKey("type"),
                _ => ListMerge::Replace,
            }
        }
        "Node" => match path {
            "status.conditions" | "status.addresses" => ListMerge::ByKey("type"),
            "spec.podCIDRs" => ListMerge::Primitive,
            _ => ListMerge::Replace,
        },
        "Namespace" if path == "status.conditions" => ListMerge::ByKey("type"),
        "ResourceClaim" if path == "status.reservedFor" => ListMerge::ByKey("uid"),
        "PodSchedulingContext" if path == "status.resourceClaims" => ListMerge::ByKey("name"),
        _ => ListMerge::Replace,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Applies a strategic merge patch for `kind` to `target`.
pub fn strategic_merge(kind: &str, target: &mut Value, patch: &Value) {
    merge_value(kind, "", target, patch);
}

fn merge_value(kind: &str, at: &str, target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => merge_map(kind, at, t, p),
        _ => *target = clean(patch),
    }
}

fn merge_map(kind: &str, at: &str, target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = clean_map(patch);
        return;
    }
    let mut retain: Option<Vec<String>> = None;
    for (key, value) in patch {
        if key == "$patch" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if key == "$retainKeys" {
            retain = value.as_array().map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            });
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(remove)) = (
                target.get_mut(field).and_then(Value::as_array_mut),
                value.as_array(),
            ) {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        let child_path = join(at, key);
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(p) if p.get("$patch").and_then(Value::as_str) == Some("delete") => {
                target.remove(key);
            }
            Value::Object(_) => match target.get_mut(key) {
                Some(existing) if existing.is_object() => {
                    merge_value(kind, &child_path, existing, value);
                }
                _ => {
                    target.insert(key.clone(), clean(value));
                }
            },
            Value::Array(items) => {
                let merged = merge_list(kind, &child_path, target.get(key), items);
                target.insert(key.clone(), Value::Array(merged));
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
    if let Some(keep) = retain {
        target.retain(|k, _| keep.contains(k));
    }
}

fn merge_list(kind: &str, path: &str, current: Option<&Value>, items: &[Value]) -> Vec<Value> {
    let current: Vec<Value> = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(clean)
            .collect();
    }
    match list_strategy(kind, path) {
        ListMerge::Replace => items.iter().map(clean).collect(),
        ListMerge::Primitive => {
            let mut out = current;
            for item in items {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            out
        }
        ListMerge::ByKey(merge_key) => {
            let mut out = current;
            for item in items {
                let Some(key_value) = item.get(merge_key) else {
                    out.push(clean(item));
                    continue;
                };
                let pos = out.iter().position(|c| c.get(merge_key) == Some(key_value));
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        out.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => merge_value(kind, path, &mut out[i], item),
                    (None, false) => out.push(clean(item)),
                }
            }
            out
        }
    }
}

/// Strips patch directives from a value that is inserted as a whole.
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(clean_map(m)),
        Value::Array(a) => Value::Array(a.iter().map(clean).collect()),
        other => other.clone(),
    }
}

fn clean_map(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), clean(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reserved_for_merges_by_uid() {
        let mut claim = json!({"status": {"allocation": {}, "reservedFor": [{"resource": "pods", "name": "a", "uid": "1"}]}});
        let patch =
            json!({"status": {"reservedFor": [{"resource": "pods", "name": "b", "uid": "2"}]}});
        strategic_merge("ResourceClaim", &mut claim, &patch);
        let uids: Vec<_> = claim["status"]["reservedFor"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uid"].clone())
            .collect();
        assert_eq!(uids, vec![json!("1"), json!("2")]);
        let delete = json!({"status": {"reservedFor": [{"uid": "1", "$patch": "delete"}]}});
        strategic_merge("ResourceClaim", &mut claim, &delete);
        assert_eq!(
            claim["status"]["reservedFor"],
            json!([{"resource": "pods", "name": "b", "uid": "2"}])
        );
    }

    #[test]
    fn finalizers_union_and_delete_from_primitive_list() {
        let mut obj = json!({"metadata": {"finalizers": ["a", "b"]}});
        strategic_merge(
            "ConfigMap",
            &mut obj,
            &json!({"metadata": {"finalizers": ["c", "a"]}}),
        );
        assert_eq!(obj["metadata"]["finalizers"], json!(["a", "b", "c"]));
        strategic_merge(
            "ConfigMap",
            &mut obj,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
        );
        assert_eq!(obj["metadata"]["finalizers"], json!(["a", "c"]));
    }

    #[test]
    fn containers_merge_by_name_and_other_lists_replace() {
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}], "tolerations": [{"key": "k"}]}});
        let patch = json!({"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}], "spec": {"containers": [{"name": "b", "image": "z"}], "tolerations": [{"key": "j"}]}});
        strategic_merge("Pod", &mut pod, &patch);
        assert_eq!(pod["spec"]["containers"][1]["image"], json!("z"));
        assert_eq!(pod["spec"]["containers"][0]["image"], json!("x"));
        assert_eq!(pod["spec"]["tolerations"], json!([{"key": "j"}]));
        assert!(pod.get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn null_removes_a_field_and_replace_directive_replaces_a_map() {
        let mut obj = json!({"data": {"a": "1", "b": "2"}, "x": 1});
        strategic_merge(
            "ConfigMap",
            &mut obj,
            &json!({"x": null, "data": {"$patch": "replace", "c": "3"}}),
        );
        assert_eq!(obj, json!({"data": {"c": "3"}}));
    }
}
