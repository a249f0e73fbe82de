//! Who may use admin access (KEP 5018): a `ResourceClaim` or `ResourceClaimTemplate` whose
//! request asks for `adminAccess: true`, and a claim status whose allocation grants it, are
//! accepted only in a namespace labelled `resource.kubernetes.io/admin-access: "true"`, as
//! `AuthorizedForAdmin` and `AuthorizedForAdminStatus` of kubernetes/kubernetes
//! `pkg/registry/resource/utils.go` decide (called from the `Validate` of the claim and template
//! strategies and the `ValidateUpdate` of the claim status strategy). The spec is immutable, so a
//! spec update is not checked again; a status that granted admin access already is not either.
//!
//! Runs after the gated fields were dropped, so with `DRAAdminAccess` off there is nothing to
//! check. Pure: the caller reads the namespace from the store before the write.

use serde_json::Value;

use crate::server::error::FieldCause;

/// The namespace label that allows admin access (`resource.DRAAdminNamespaceLabelKey`).
pub const NAMESPACE_LABEL: &str = "resource.kubernetes.io/admin-access";

/// What the write knows of the object's namespace: the stored object, or none (not found).
pub type Namespace<'a> = Option<&'a Value>;

/// The causes refusing a new claim or template (`kind`) in `namespace`; `obj` is the new object.
pub fn create_causes(kind: &str, obj: &Value, namespace: Namespace<'_>) -> Vec<FieldCause> {
    let requests = match kind {
        "ResourceClaim" => &obj["spec"]["devices"]["requests"],
        "ResourceClaimTemplate" => &obj["spec"]["spec"]["devices"]["requests"],
        _ => return Vec::new(),
    };
    let asked = list(requests)
        .iter()
        .position(|r| r["exactly"]["adminAccess"] == Value::Bool(true));
    // The path upstream names, for templates too.
    asked.map_or_else(Vec::new, |i| {
        check(
            &obj["metadata"],
            namespace,
            format!("spec.devices.requests[{i}].adminAccess"),
        )
    })
}

/// The causes refusing a status write of a claim from `old` to `new` in `namespace`.
pub fn status_causes(old: &Value, new: &Value, namespace: Namespace<'_>) -> Vec<FieldCause> {
    if admin_result(old).is_some() {
        return Vec::new();
    }
    admin_result(new).map_or_else(Vec::new, |i| {
        check(
            &new["metadata"],
            namespace,
            format!("status.allocation.devices.results[{i}].adminAccess"),
        )
    })
}

/// Whether `namespace` (a stored Namespace) allows admin access.
pub fn namespace_allows(namespace: &Value) -> bool {
    namespace["metadata"]["labels"][NAMESPACE_LABEL] == "true"
}

/// The index of the first allocation result of `claim` with admin access.
fn admin_result(claim: &Value) -> Option<usize> {
    list(&claim["status"]["allocation"]["devices"]["results"])
        .iter()
        .position(|r| r["adminAccess"] == Value::Bool(true))
}

fn check(meta: &Value, namespace: Namespace<'_>, field: String) -> Vec<FieldCause> {
    match namespace {
        Some(ns) if namespace_allows(ns) => Vec::new(),
        Some(_) => vec![FieldCause::forbidden(
            field,
            &format!(
                "admin access to devices requires the `{NAMESPACE_LABEL}: true` label on the \
                 containing namespace"
            ),
        )],
        None => {
            let ns = meta["namespace"].as_str().unwrap_or_default();
            vec![FieldCause {
                reason: "InternalError",
                field,
                message: format!(
                    "Internal error: could not retrieve namespace to verify admin access: \
                     namespaces \"{ns}\" not found"
                ),
            }]
        }
    }
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claim(admin: bool) -> Value {
        json!({"metadata": {"name": "c", "namespace": "ops"},
            "spec": {"devices": {"requests": [
                {"name": "a", "exactly": {"deviceClassName": "gpu"}},
                {"name": "b", "exactly": {"deviceClassName": "gpu", "adminAccess": admin}}]}}})
    }

    #[allow(clippy::needless_pass_by_value)] // takes the `json!` value it embeds
    fn namespace(labels: Value) -> Value {
        json!({"metadata": {"name": "ops", "labels": labels}})
    }

    #[test]
    fn an_admin_request_needs_the_label_with_the_value_true() {
        let plain = namespace(json!({}));
        let causes = create_causes("ResourceClaim", &claim(true), Some(&plain));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].reason, "FieldValueForbidden");
        assert_eq!(causes[0].field, "spec.devices.requests[1].adminAccess");
        assert_eq!(
            causes[0].message,
            "Forbidden: admin access to devices requires the \
             `resource.kubernetes.io/admin-access: true` label on the containing namespace"
        );
        let wrong = namespace(json!({NAMESPACE_LABEL: "True"}));
        assert_eq!(
            create_causes("ResourceClaim", &claim(true), Some(&wrong)).len(),
            1
        );
        let labelled = namespace(json!({NAMESPACE_LABEL: "true"}));
        assert!(create_causes("ResourceClaim", &claim(true), Some(&labelled)).is_empty());
        assert!(create_causes("ResourceClaim", &claim(false), Some(&plain)).is_empty());
    }

    #[test]
    fn a_template_is_checked_with_the_claim_path() {
        let template = json!({"metadata": {"name": "t", "namespace": "ops"},
            "spec": {"spec": claim(true)["spec"].clone()}});
        let causes = create_causes(
            "ResourceClaimTemplate",
            &template,
            Some(&namespace(json!({}))),
        );
        assert_eq!(causes[0].field, "spec.devices.requests[1].adminAccess");
        assert_eq!(create_causes("DeviceClass", &template, None), Vec::new());
    }

    #[test]
    fn a_status_granting_admin_access_is_checked_once() {
        let mut old = claim(true);
        let mut new = old.clone();
        new["status"] = json!({"allocation": {"devices": {"results": [
            {"request": "a", "driver": "d", "pool": "p", "device": "x"},
            {"request": "b", "driver": "d", "pool": "p", "device": "x", "adminAccess": true}]}}});
        let plain = namespace(json!({}));
        let causes = status_causes(&old, &new, Some(&plain));
        assert_eq!(
            causes[0].field,
            "status.allocation.devices.results[1].adminAccess"
        );
        old["status"] = new["status"].clone();
        assert!(status_causes(&old, &new, Some(&plain)).is_empty());
        let missing = status_causes(&claim(true), &new, None);
        assert_eq!(missing[0].reason, "InternalError");
        assert!(missing[0].message.contains("namespaces \"ops\" not found"));
    }
}
