//! Conversion between the stored `resource.k8s.io/v1` shape and the other versions of the group
//! a `v1`-generation server can serve, as the API server's conversion functions
//! (`pkg/apis/resource/v1beta1/conversion.go`) do it:
//!
//! - `v1beta1` differs in two places: a request carries the fields of `exactly`
//!   (`deviceClassName`, `selectors`, `allocationMode`, `count`, `adminAccess`, `tolerations`,
//!   `capacity`) at its own level beside `firstAvailable`, and a slice's device carries all but
//!   its `name` under `basic`;
//! - `v1beta2` and `v1alpha3` (`DeviceTaintRule` only) have the `v1` shape.
//!
//! Fields neither side knows stay where they were, so strict decoding still names them.
//! Pure functions over JSON; no store or HTTP dependencies.

use serde_json::{Map, Value};

/// The fields of `exactly` that a `v1beta1` request carries at its own level.
const EXACT_FIELDS: [&str; 7] = [
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
];

/// The version whose shape differs from `v1`.
const V1BETA1: &str = "v1beta1";

/// The claim specs of an object of `kind` (a claim's `spec`, a template's `spec.spec`).
fn claim_spec<'a>(kind: &str, obj: &'a mut Value) -> Option<&'a mut Value> {
    match kind {
        "ResourceClaim" => obj.get_mut("spec"),
        "ResourceClaimTemplate" => obj.get_mut("spec")?.get_mut("spec"),
        _ => None,
    }
}

fn requests<'a>(
    kind: &str,
    obj: &'a mut Value,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    claim_spec(kind, obj)
        .and_then(|spec| spec.pointer_mut("/devices/requests"))
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn devices(obj: &mut Value) -> impl Iterator<Item = &mut Map<String, Value>> {
    obj.pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Whether objects of `version` have the `v1` shape (every version but `v1beta1`).
pub(super) fn shaped_like_v1(version: &str) -> bool {
    version != V1BETA1
}

/// `obj`, written as `version` of `kind`, in the stored `v1` shape.
pub fn to_v1(kind: &str, version: &str, mut obj: Value) -> Value {
    if version != V1BETA1 {
        return obj;
    }
    for request in requests(kind, &mut obj) {
        let mut exactly = Map::new();
        for field in EXACT_FIELDS {
            if let Some(value) = request.remove(field) {
                exactly.insert(field.to_owned(), value);
            }
        }
        let first_available = request
            .get("firstAvailable")
            .and_then(Value::as_array)
            .is_some_and(|subs| !subs.is_empty());
        if !first_available || exactly.values().any(|v| !v.is_null()) {
            request.insert("exactly".into(), Value::Object(exactly));
        }
    }
    if kind == "ResourceSlice" {
        for device in devices(&mut obj) {
            if let Some(Value::Object(basic)) = device.remove("basic") {
                for (field, value) in basic {
                    device.entry(field).or_insert(value);
                }
            }
        }
    }
    obj
}

/// The stored `v1` object `stored` of `kind` as a client of `version` sees it (without
/// `apiVersion`, which the caller sets).
pub fn from_v1(kind: &str, version: &str, stored: &Value) -> Value {
    let mut obj = stored.clone();
    if version != V1BETA1 {
        return obj;
    }
    for request in requests(kind, &mut obj) {
        if let Some(Value::Object(exactly)) = request.remove("exactly") {
            for (field, value) in exactly {
                request.insert(field, value);
            }
        }
    }
    if kind == "ResourceSlice" {
        for device in devices(&mut obj) {
            let basic: Map<String, Value> = device
                .keys()
                .filter(|k| *k != "name")
                .cloned()
                .collect::<Vec<_>>()
                .into_iter()
                .filter_map(|k| device.remove_entry(&k))
                .collect();
            device.insert("basic".into(), Value::Object(basic));
        }
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim_v1beta1() -> Value {
        json!({"spec": {"devices": {"requests": [
            {"name": "gpu", "deviceClassName": "gpu.example.com", "count": 2,
             "allocationMode": "ExactCount", "adminAccess": true,
             "selectors": [{"cel": {"expression": "true"}}],
             "tolerations": [{"key": "k", "operator": "Exists"}]},
            {"name": "nic", "firstAvailable": [
                {"name": "fast", "deviceClassName": "nic", "allocationMode": "All"}]}
        ]}}})
    }

    #[test]
    fn a_v1beta1_request_nests_its_device_fields_under_exactly_in_v1() {
        let v1 = to_v1("ResourceClaim", "v1beta1", claim_v1beta1());
        assert_eq!(
            v1["spec"]["devices"]["requests"],
            json!([
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2,
                 "allocationMode": "ExactCount", "adminAccess": true,
                 "selectors": [{"cel": {"expression": "true"}}],
                 "tolerations": [{"key": "k", "operator": "Exists"}]}},
                {"name": "nic", "firstAvailable": [
                    {"name": "fast", "deviceClassName": "nic", "allocationMode": "All"}]}
            ])
        );
        assert_eq!(from_v1("ResourceClaim", "v1beta1", &v1), claim_v1beta1());
    }

    #[test]
    fn a_template_converts_its_inner_spec_and_v1beta2_is_left_as_it_is() {
        let template = json!({"spec": {"spec": claim_v1beta1()["spec"].clone()}});
        let v1 = to_v1("ResourceClaimTemplate", "v1beta1", template.clone());
        assert!(v1["spec"]["spec"]["devices"]["requests"][0]["exactly"].is_object());
        assert_eq!(from_v1("ResourceClaimTemplate", "v1beta1", &v1), template);
        assert_eq!(
            to_v1("ResourceClaim", "v1beta2", claim_v1beta1()),
            claim_v1beta1()
        );
    }

    #[test]
    fn both_shapes_set_in_v1beta1_reach_validation_as_both_set() {
        let both = json!({"spec": {"devices": {"requests": [{"name": "r",
            "deviceClassName": "c", "firstAvailable": [{"name": "s", "deviceClassName": "c"}]}]}}});
        let v1 = to_v1("ResourceClaim", "v1beta1", both);
        let request = &v1["spec"]["devices"]["requests"][0];
        assert_eq!(request["exactly"]["deviceClassName"], "c");
        assert!(request["firstAvailable"].is_array());
    }

    #[test]
    fn a_v1beta1_device_keeps_its_fields_under_basic() {
        let v1beta1 = json!({"spec": {"driver": "d", "devices": [
            {"name": "a", "basic": {"attributes": {"model": {"string": "H100"}},
             "capacity": {"memory": {"value": "80Gi"}},
             "taints": [{"key": "k", "effect": "NoSchedule"}]}}
        ]}});
        let v1 = to_v1("ResourceSlice", "v1beta1", v1beta1.clone());
        assert_eq!(
            v1["spec"]["devices"][0],
            json!({"name": "a", "attributes": {"model": {"string": "H100"}},
                "capacity": {"memory": {"value": "80Gi"}},
                "taints": [{"key": "k", "effect": "NoSchedule"}]})
        );
        assert_eq!(from_v1("ResourceSlice", "v1beta1", &v1), v1beta1);
    }
}
