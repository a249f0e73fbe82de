//! A claim's `spec.devices`: the requests (`exactly` one kind of device, or `firstAvailable` of
//! several alternatives), the constraints across them and their configuration; with the API's
//! defaults (`allocationMode: ExactCount`, `count: 1`) as functions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    nullable, CapacityRequirements, DeviceSelector, DeviceToleration, OpaqueDeviceConfiguration,
};

/// `allocationMode` of a request taking a fixed number of devices (the default).
pub const EXACT_COUNT: &str = "ExactCount";
/// `allocationMode` of a request taking every matching device.
pub const ALL: &str = "All";

/// The mode of a request or subrequest with the API's default applied.
pub fn allocation_mode(mode: Option<&str>) -> &str {
    match mode {
        None | Some("") => EXACT_COUNT,
        Some(mode) => mode,
    }
}

/// The count of an `ExactCount` request with the API's default applied (0 or unset is 1).
pub fn exact_count(count: Option<i64>) -> i64 {
    match count {
        None | Some(0) => 1,
        Some(count) => count,
    }
}

/// A claim's `spec.devices`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaim {
    /// The requests, in order.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<DeviceRequest>,
    /// Constraints across the devices of some or all requests.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<DeviceConstraint>,
    /// Configuration for some or all requests.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<DeviceClaimConfiguration>,
}

/// One request: exactly one of `exactly` and `firstAvailable`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    /// The request's name (results name it, or `<name>/<subrequest>`).
    #[serde(default)]
    pub name: String,
    /// One kind of device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exactly: Option<ExactDeviceRequest>,
    /// Alternatives, tried in order.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub first_available: Vec<DeviceSubRequest>,
}

/// `exactly`: devices of one class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExactDeviceRequest {
    /// The class the devices must belong to.
    #[serde(default)]
    pub device_class_name: String,
    /// Further selectors, all of which must match.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
    /// `ExactCount` (the default) or `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_mode: Option<String>,
    /// The number of devices for `ExactCount` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Admin access to devices that may be in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_access: Option<bool>,
    /// The device taints the request tolerates (at most 16).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<DeviceToleration>,
    /// What each device must provide of its capacities (consumable capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRequirements>,
}

/// One alternative of `firstAvailable`: an `exactly` without admin access, and a name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSubRequest {
    /// The subrequest's name.
    #[serde(default)]
    pub name: String,
    /// The class the devices must belong to.
    #[serde(default)]
    pub device_class_name: String,
    /// Further selectors, all of which must match.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
    /// `ExactCount` (the default) or `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_mode: Option<String>,
    /// The number of devices for `ExactCount` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// The device taints the alternative tolerates (at most 16).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<DeviceToleration>,
    /// What each device must provide of its capacities (consumable capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRequirements>,
}

/// A constraint over the devices of some requests (all when `requests` is empty).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceConstraint {
    /// `req` or `req/sub` names; empty for every request of the claim.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// A fully qualified attribute (`domain/id`) all the devices share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_attribute: Option<String>,
    /// A fully qualified attribute (`domain/id`) no two of the devices share (consumable
    /// capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_attribute: Option<String>,
}

/// A claim's configuration entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaimConfiguration {
    /// The requests it is for; empty for all.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// Driver-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_claim_spec_reads_with_its_defaults() {
        let spec: DeviceClaim = serde_json::from_value(json!({
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "g", "selectors": [
                    {"cel": {"expression": "true"}}
                ]}},
                {"name": "nic", "firstAvailable": [
                    {"name": "fast", "deviceClassName": "n", "allocationMode": "All"}
                ]}
            ],
            "constraints": [{"matchAttribute": "gpu.example.com/numa"}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "d", "parameters": {"a": 1}}}]
        }))
        .unwrap();
        let exact = spec.requests[0].exactly.as_ref().unwrap();
        assert_eq!(
            allocation_mode(exact.allocation_mode.as_deref()),
            EXACT_COUNT
        );
        assert_eq!(exact_count(exact.count), 1);
        assert_eq!(exact.selectors[0].cel.as_ref().unwrap().expression, "true");
        let sub = &spec.requests[1].first_available[0];
        assert_eq!(allocation_mode(sub.allocation_mode.as_deref()), ALL);
        assert!(spec.constraints[0].requests.is_empty());
        assert_eq!(spec.config[0].opaque.as_ref().unwrap().parameters["a"], 1);
    }

    #[test]
    fn null_lists_read_as_empty_and_empty_ones_are_left_out() {
        let spec: DeviceClaim = serde_json::from_value(json!({
            "requests": [{"name": "gpu", "firstAvailable": null,
                "exactly": {"deviceClassName": "g", "selectors": []}}],
            "constraints": null
        }))
        .unwrap();
        assert!(spec.constraints.is_empty());
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]})
        );
    }
}
