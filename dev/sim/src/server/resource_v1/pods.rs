//! Pods as a 1.34 API server stores them: `spec.resourceClaims[]` entries are `{name,
//! resourceClaimName | resourceClaimTemplateName}` (1.30's `source` is gone) and a container's
//! `resources.claims[]` entry may name a `request`. The typed 1.30 pod struct the server decodes
//! pods with drops both, so [`keep_claim_fields`] puts them back in their 1.34 shape after that
//! decode; [`claim_causes`] checks them. The scheduler's record of the claim it made for
//! extended resources (`status.extendedResourceClaimStatus`, 1.36+) is kept the same way
//! ([`keep_extended_resource_status`]), and so is the device health the kubelet reports in
//! `status.containerStatuses[].allocatedResourcesStatus` (1.31+ behind `ResourceHealthStatus`,
//! its `message` behind `ResourceHealthStatusMessage`; [`keep_allocated_resources_status`]).
//!
//! Pure functions over JSON; no store or HTTP dependencies.

use serde_json::{Map, Value};

use crate::server::error::{FieldCause, Result, StatusError};
use crate::server::validation::{is_dns_label, is_dns_subdomain, LABEL_MSG, SUBDOMAIN_MSG};

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

fn string_field(entry: &Map<String, Value>, key: &str, at: &str) -> Result<Option<Value>> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::String(_)) => Ok(Some(v.clone())),
        Some(other) => Err(StatusError::BadRequest(format!(
            "Pod in version \"v1\" cannot be handled as a Pod: {at}.{key}: expected a string, got {other}"
        ))),
    }
}

fn pruned(entry: &Value, keys: &[&str], at: &str) -> Result<Value> {
    let Some(entry) = entry.as_object() else {
        return Err(StatusError::BadRequest(format!(
            "Pod in version \"v1\" cannot be handled as a Pod: {at}: expected an object"
        )));
    };
    let mut out = Map::new();
    for key in keys {
        if let Some(v) = string_field(entry, key, at)? {
            out.insert((*key).to_owned(), v);
        }
    }
    Ok(Value::Object(out))
}

/// Copies `status.extendedResourceClaimStatus` (`resourceClaimName`, `requestMappings[]` of
/// `containerName`, `resourceName`, `requestName`) of `original` into `normalised`, pruned, when
/// `enabled` (the `DRAExtendedResource` gate; with it off the field is dropped).
pub fn keep_extended_resource_status(
    original: &Value,
    enabled: bool,
    normalised: &mut Value,
) -> Result<()> {
    let Some(status) = original
        .pointer("/status/extendedResourceClaimStatus")
        .filter(|s| enabled && !s.is_null())
    else {
        return Ok(());
    };
    let at = "status.extendedResourceClaimStatus";
    let mut kept = pruned(status, &["resourceClaimName"], at)?;
    let mappings = status["requestMappings"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let mappings = mappings
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let at = format!("{at}.requestMappings[{i}]");
            pruned(m, &["containerName", "resourceName", "requestName"], &at)
        })
        .collect::<Result<Vec<_>>>()?;
    kept["requestMappings"] = Value::Array(mappings);
    if let Some(s) = normalised.get_mut("status").and_then(Value::as_object_mut) {
        s.insert("extendedResourceClaimStatus".into(), kept);
    } else if let Some(o) = normalised.as_object_mut() {
        o.insert(
            "status".into(),
            serde_json::json!({"extendedResourceClaimStatus": kept}),
        );
    }
    Ok(())
}

/// Copies `allocatedResourcesStatus` (`name`, `resources[]` of `resourceID`, `health` and, with
/// `message` on, `message`) of each of `original`'s container statuses into the container status
/// of the same index in `normalised`, when `enabled` (the `ResourceHealthStatus` gate; with it
/// off the field is dropped, as the API server drops disabled pod fields).
pub fn keep_allocated_resources_status(
    original: &Value,
    enabled: bool,
    message: bool,
    normalised: &mut Value,
) -> Result<()> {
    if !enabled {
        return Ok(());
    }
    for list in ["containerStatuses", "initContainerStatuses"] {
        let Some(statuses) = original
            .pointer(&format!("/status/{list}"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for (i, status) in statuses.iter().enumerate() {
            let Some(entries) = status
                .get("allocatedResourcesStatus")
                .and_then(Value::as_array)
            else {
                continue;
            };
            let at = format!("status.{list}[{i}].allocatedResourcesStatus");
            let kept = entries
                .iter()
                .enumerate()
                .map(|(j, entry)| {
                    let at = format!("{at}[{j}]");
                    let mut kept = pruned(entry, &["name"], &at)?;
                    let resources = entry["resources"].as_array().map_or(&[][..], Vec::as_slice);
                    let fields: &[&str] = if message {
                        &["resourceID", "health", "message"]
                    } else {
                        &["resourceID", "health"]
                    };
                    let resources = resources
                        .iter()
                        .enumerate()
                        .map(|(k, r)| pruned(r, fields, &format!("{at}.resources[{k}]")))
                        .collect::<Result<Vec<_>>>()?;
                    kept["resources"] = Value::Array(resources);
                    Ok(kept)
                })
                .collect::<Result<Vec<_>>>()?;
            if let Some(target) = normalised
                .pointer_mut(&format!("/status/{list}/{i}"))
                .and_then(Value::as_object_mut)
            {
                target.insert("allocatedResourcesStatus".into(), Value::Array(kept));
            }
        }
    }
    Ok(())
}

/// Copies the 1.34 claim fields of `original` (as sent) into `normalised` (the same pod after
/// the 1.30 typed decode), in their 1.34 shape and without unknown fields.
pub fn keep_claim_fields(original: &Value, normalised: &mut Value) -> Result<()> {
    if let Some(claims) = original
        .pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
    {
        let kept = claims
            .iter()
            .enumerate()
            .map(|(i, c)| {
                pruned(
                    c,
                    &["name", "resourceClaimName", "resourceClaimTemplateName"],
                    &format!("spec.resourceClaims[{i}]"),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        if let Some(spec) = normalised.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("resourceClaims".into(), Value::Array(kept));
        }
    }
    for list in CONTAINER_LISTS {
        let Some(containers) = original
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for (i, c) in containers.iter().enumerate() {
            let Some(claims) = c.pointer("/resources/claims").and_then(Value::as_array) else {
                continue;
            };
            let kept = claims
                .iter()
                .enumerate()
                .map(|(j, c)| {
                    pruned(
                        c,
                        &["name", "request"],
                        &format!("spec.{list}[{i}].resources.claims[{j}]"),
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            if let Some(resources) = normalised
                .pointer_mut(&format!("/spec/{list}/{i}/resources"))
                .and_then(Value::as_object_mut)
            {
                resources.insert("claims".into(), Value::Array(kept));
            }
        }
    }
    Ok(())
}

/// The rules of a 1.34 pod's claims: unique DNS-label names, exactly one of the two claim
/// names, and container claims that name a pod claim (once per container).
pub fn claim_causes(pod: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let claims = pod
        .pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let at = format!("spec.resourceClaims[{i}]");
        let name = c["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(FieldCause::required(format!("{at}.name"), ""));
        } else if !is_dns_label(name) {
            causes.push(FieldCause::invalid(format!("{at}.name"), name, LABEL_MSG));
        } else if names.contains(&name) {
            causes.push(FieldCause {
                reason: "FieldValueDuplicate",
                field: format!("{at}.name"),
                message: format!("Duplicate value: {name:?}"),
            });
        }
        names.push(name);
        let claim = c["resourceClaimName"].as_str();
        let template = c["resourceClaimTemplateName"].as_str();
        match (claim, template) {
            (Some(_), Some(_)) => causes.push(FieldCause::invalid(
                at,
                "`resourceClaimName`, `resourceClaimTemplateName`",
                "may not specify more than one of: `resourceClaimName`, `resourceClaimTemplateName`",
            )),
            (None, None) => causes.push(FieldCause::invalid(
                at,
                "",
                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            )),
            (Some(object), None) | (None, Some(object)) => {
                let field = if claim.is_some() {
                    "resourceClaimName"
                } else {
                    "resourceClaimTemplateName"
                };
                if !is_dns_subdomain(object) || object.is_empty() {
                    causes.push(FieldCause::invalid(format!("{at}.{field}"), object, SUBDOMAIN_MSG));
                }
            }
        }
    }
    for list in CONTAINER_LISTS {
        let containers = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for (i, c) in containers.iter().enumerate() {
            let used = c
                .pointer("/resources/claims")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let mut seen: Vec<(&str, &str)> = Vec::new();
            for (j, u) in used.iter().enumerate() {
                let at = format!("spec.{list}[{i}].resources.claims[{j}]");
                let name = u["name"].as_str().unwrap_or_default();
                let request = u["request"].as_str().unwrap_or_default();
                if name.is_empty() {
                    causes.push(FieldCause::required(format!("{at}.name"), ""));
                } else if !names.contains(&name) {
                    causes.push(FieldCause {
                        reason: "FieldValueNotFound",
                        field: format!("{at}.name"),
                        message: format!(
                            "Not found: {name:?}: must be one of the names in pod.spec.resourceClaims"
                        ),
                    });
                }
                if seen.contains(&(name, request)) {
                    causes.push(FieldCause {
                        reason: "FieldValueDuplicate",
                        field: at,
                        message: format!("Duplicate value: {name:?}"),
                    });
                }
                seen.push((name, request));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn device_health_in_container_statuses_is_kept_by_gate_and_its_message_by_its_own() {
        let original = json!({"status": {"containerStatuses": [
            {"name": "app", "ready": true, "allocatedResourcesStatus": [{
                "name": "claim:gpu",
                "resources": [{"resourceID": "d/claim=u", "health": "Unhealthy", "message": "fan", "x": 1}],
                "unknown": true
            }]}
        ]}});
        let stripped = json!({"status": {"containerStatuses": [{"name": "app", "ready": true}]}});
        let mut kept = stripped.clone();
        keep_allocated_resources_status(&original, true, true, &mut kept).unwrap();
        assert_eq!(
            kept["status"]["containerStatuses"][0]["allocatedResourcesStatus"],
            json!([{"name": "claim:gpu", "resources": [
                {"resourceID": "d/claim=u", "health": "Unhealthy", "message": "fan"}
            ]}])
        );
        let mut without_message = stripped.clone();
        keep_allocated_resources_status(&original, true, false, &mut without_message).unwrap();
        assert_eq!(
            without_message["status"]["containerStatuses"][0]["allocatedResourcesStatus"][0]
                ["resources"][0],
            json!({"resourceID": "d/claim=u", "health": "Unhealthy"})
        );
        let mut dropped = stripped.clone();
        keep_allocated_resources_status(&original, false, true, &mut dropped).unwrap();
        assert_eq!(dropped, stripped);
    }

    #[test]
    fn claim_fields_come_back_in_their_1_34_shape_without_source() {
        let sent = json!({"spec": {
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "t", "source": {"resourceClaimName": "x"}},
                {"name": "nic", "resourceClaimName": "n", "extra": 1},
            ],
            "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu", "request": "r0"}]}}],
        }});
        let mut stored = json!({"spec": {
            "resourceClaims": [{"name": "gpu", "source": {"resourceClaimName": "x"}}, {"name": "nic"}],
            "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
        }});
        keep_claim_fields(&sent, &mut stored).unwrap();
        assert_eq!(
            stored["spec"]["resourceClaims"],
            json!([{"name": "gpu", "resourceClaimTemplateName": "t"}, {"name": "nic", "resourceClaimName": "n"}])
        );
        assert_eq!(
            stored["spec"]["containers"][0]["resources"]["claims"],
            json!([{"name": "gpu", "request": "r0"}])
        );
    }

    #[test]
    fn a_claim_name_that_is_not_a_string_is_a_bad_request() {
        let sent = json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": 7}]}});
        let error = keep_claim_fields(&sent, &mut json!({"spec": {}})).unwrap_err();
        assert!(error.to_string().contains("resourceClaimName"), "{error}");
    }

    #[test]
    fn claims_need_exactly_one_source_and_containers_must_name_pod_claims() {
        let pod = json!({"spec": {
            "resourceClaims": [
                {"name": "a", "resourceClaimName": "x", "resourceClaimTemplateName": "y"},
                {"name": "b"},
                {"name": "c", "resourceClaimName": "ok"},
                {"name": "c", "resourceClaimName": "ok"},
            ],
            "containers": [{"name": "m", "resources": {"claims": [{"name": "zzz"}, {"name": "c"}]}}],
        }});
        let fields: Vec<String> = claim_causes(&pod)
            .into_iter()
            .map(|c| format!("{} {}", c.field, c.message))
            .collect();
        assert!(
            fields
                .iter()
                .any(|f| f.starts_with("spec.resourceClaims[0] ") && f.contains("more than one")),
            "{fields:?}"
        );
        assert!(
            fields
                .iter()
                .any(|f| f.starts_with("spec.resourceClaims[1] ")
                    && f.contains("must specify one of")),
            "{fields:?}"
        );
        assert!(
            fields
                .iter()
                .any(|f| f.starts_with("spec.resourceClaims[3].name") && f.contains("Duplicate")),
            "{fields:?}"
        );
        assert!(
            fields.iter().any(
                |f| f.starts_with("spec.containers[0].resources.claims[0].name")
                    && f.contains("must be one of the names")
            ),
            "{fields:?}"
        );
        assert_eq!(fields.len(), 4, "{fields:?}");
    }
}
