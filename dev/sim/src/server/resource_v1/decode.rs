//! How a 1.34 to 1.37 API server decodes the `resource.k8s.io/v1` objects: into the
//! workspace's one model of them, `dra_types::resource_v1`, and encoded again. Decoding drops
//! unknown fields; a field of the wrong type fails the decode (400). The fields of features whose
//! gate is off are the model's like any other: the server drops them afterwards
//! (`super::gated`).
//!
//! The server wraps the model where it decodes more leniently than a client: a client refuses
//! an attribute value that sets none or several of `int`, `bool`, `string`, `version`
//! (`DeviceAttribute`), while the server reads it as the API's four optional fields
//! (`DeviceAttributeFields`) and leaves the rule to validation, which names the field at fault
//! (422). Only the shape lives here; rules are in [`super::validate`].

use std::collections::BTreeMap;

use dra_types::resource_v1::{
    DeviceAttributeFields, DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate,
    ResourceSlice, VERSION,
};
use serde_json::Value;

use crate::server::error::Result;
use crate::server::typed::decode_as;

/// Decodes `obj` as `kind` and encodes it again; any other kind is returned as it is.
pub fn normalise(kind: &str, obj: &Value) -> Result<Value> {
    match kind {
        "DeviceClass" => decode_as::<DeviceClass>(kind, VERSION, obj),
        "ResourceClaim" => decode_as::<ResourceClaim>(kind, VERSION, obj),
        "ResourceClaimTemplate" => decode_as::<ResourceClaimTemplate>(kind, VERSION, obj),
        "ResourceSlice" => slice(obj),
        "DeviceTaintRule" => decode_as::<DeviceTaintRule>(kind, VERSION, obj),
        _ => Ok(obj.clone()),
    }
}

/// A slice: the attribute maps of its devices are set aside, the rest decoded as a
/// `ResourceSlice`, and each map decoded as [`DeviceAttributeFields`] put back into its device.
fn slice(obj: &Value) -> Result<Value> {
    let mut obj = obj.clone();
    let attributes: Vec<(usize, Value)> = obj
        .pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
        .map(|devices| {
            devices
                .iter_mut()
                .enumerate()
                .filter_map(|(i, d)| Some((i, d.as_object_mut()?.remove("attributes")?)))
                .collect()
        })
        .unwrap_or_default();
    let mut slice = decode_as::<ResourceSlice>("ResourceSlice", VERSION, &obj)?;
    for (i, attributes) in attributes {
        let attributes = decode_as::<Option<BTreeMap<String, DeviceAttributeFields>>>(
            "ResourceSlice",
            VERSION,
            &attributes,
        )?;
        let device = slice
            .pointer_mut(&format!("/spec/devices/{i}"))
            .and_then(Value::as_object_mut);
        if let (Some(device), Value::Object(map)) = (device, attributes) {
            if !map.is_empty() {
                device.insert("attributes".into(), Value::Object(map));
            }
        }
    }
    Ok(slice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_attribute_value_with_several_fields_is_kept_for_validation() {
        let obj = json!({"spec": {"driver": "d", "pool": {"name": "p", "resourceSliceCount": 1},
        "devices": [
            {"name": "a", "attributes": {"two": {"int": 1, "bool": true, "extra": 0}, "none": {}}},
            {"name": "b", "attributes": {}},
            {"name": "c", "attributes": {"model": {"string": "H100"}}, "taints": []},
        ]}});
        let normalised = normalise("ResourceSlice", &obj).unwrap();
        assert_eq!(
            normalised["spec"]["devices"],
            json!([
                {"name": "a", "attributes": {"two": {"int": 1, "bool": true}, "none": {}}},
                {"name": "b"},
                {"name": "c", "attributes": {"model": {"string": "H100"}}},
            ])
        );
        assert_eq!(normalised["spec"]["pool"]["generation"], 0);
    }

    #[test]
    fn a_wrongly_typed_attribute_value_fails_the_decode() {
        let obj =
            json!({"spec": {"devices": [{"name": "a", "attributes": {"n": {"int": "one"}}}]}});
        assert!(normalise("ResourceSlice", &obj).is_err());
    }
}
