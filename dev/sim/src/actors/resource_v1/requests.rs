//! The typed parts of `resource.k8s.io/v1` the 1.34 scheduler reads and writes: a claim's
//! `spec.devices` (requests with `exactly` or `firstAvailable`, constraints, configuration), a
//! class's selectors and configuration, and the allocation result it stores in
//! `status.allocation`. The claim itself keeps its spec and status untyped (see
//! [`super::ResourceClaim`]) so that a write loses nothing; these types are read from and
//! written into those values.
//!
//! Types only, with the API's defaults (`allocationMode: ExactCount`, `count: 1`) as accessors.

use k8s_openapi::api::core::v1::NodeSelector;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `allocationMode` of a request taking a fixed number of devices (the default).
pub const EXACT_COUNT: &str = "ExactCount";
/// `allocationMode` of a request taking every matching device.
pub const ALL: &str = "All";

/// `DeviceClass.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassSpec {
    /// Every device of the class meets all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
    /// Passed to the drivers of the allocated devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<DeviceClassConfiguration>,
}

/// One selector; only CEL exists in v1.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSelector {
    /// The CEL selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelDeviceSelector>,
}

/// `cel.expression`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CelDeviceSelector {
    /// An expression over `device` that must be true.
    #[serde(default)]
    pub expression: String,
}

/// A class's configuration entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassConfiguration {
    /// Driver-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

/// Driver-specific parameters, copied and never interpreted by the scheduler.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpaqueDeviceConfiguration {
    /// The driver the parameters are for.
    #[serde(default)]
    pub driver: String,
    /// The parameters (a JSON object).
    #[serde(default)]
    pub parameters: Value,
}

/// A claim's `spec.devices`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaim {
    /// The requests, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<DeviceRequest>,
    /// Constraints across the devices of some or all requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<DeviceConstraint>,
    /// Configuration for some or all requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<DeviceClaimConfiguration>,
}

/// One request: exactly one of `exactly` and `firstAvailable`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    /// The request's name (results name it, or `<name>/<subrequest>`).
    #[serde(default)]
    pub name: String,
    /// One kind of device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exactly: Option<ExactDeviceRequest>,
    /// Alternatives, tried in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_available: Vec<DeviceSubRequest>,
}

/// `exactly`: devices of one class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExactDeviceRequest {
    /// The class the devices must belong to.
    #[serde(default)]
    pub device_class_name: String,
    /// Further selectors, all of which must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
    /// `ExactCount` (default) or `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_mode: Option<String>,
    /// The number of devices for `ExactCount` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Admin access to devices that may be in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_access: Option<bool>,
}

/// One alternative of `firstAvailable`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSubRequest {
    /// The subrequest's name.
    #[serde(default)]
    pub name: String,
    /// The class the devices must belong to.
    #[serde(default)]
    pub device_class_name: String,
    /// Further selectors, all of which must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
    /// `ExactCount` (default) or `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_mode: Option<String>,
    /// The number of devices for `ExactCount` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
}

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

/// A constraint over the devices of some requests (all when `requests` is empty).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceConstraint {
    /// `req` or `req/sub` names; empty for every request of the claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// A fully qualified attribute (`domain/id`) all the devices share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_attribute: Option<String>,
}

/// A claim's configuration entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaimConfiguration {
    /// The requests it is for; empty for all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// Driver-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

/// `status.allocation`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocationResult {
    /// The devices and their configuration.
    #[serde(default)]
    pub devices: DeviceAllocationResult,
    /// Where the devices can be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
}

/// `status.allocation.devices`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationResult {
    /// One entry per allocated device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<DeviceRequestAllocationResult>,
    /// The class's and the claim's configuration for the allocated requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<DeviceAllocationConfiguration>,
}

/// One allocated device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequestAllocationResult {
    /// `req` or `req/sub`.
    pub request: String,
    /// The device's driver.
    pub driver: String,
    /// The device's pool.
    pub pool: String,
    /// The device's name.
    pub device: String,
    /// Set (to true) for an admin-access request only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_access: Option<bool>,
}

/// Where a configuration entry of an allocation comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllocationConfigSource {
    /// The `DeviceClass` of the request.
    #[default]
    FromClass,
    /// The claim.
    FromClaim,
}

/// A configuration entry copied into an allocation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationConfiguration {
    /// Class or claim.
    pub source: AllocationConfigSource,
    /// The requests it applies to; empty for all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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
    fn an_allocation_is_written_in_the_api_shape() {
        let allocation = AllocationResult {
            devices: DeviceAllocationResult {
                results: vec![DeviceRequestAllocationResult {
                    request: "gpu".into(),
                    driver: "d".into(),
                    pool: "p".into(),
                    device: "gpu-0".into(),
                    admin_access: None,
                }],
                config: vec![DeviceAllocationConfiguration {
                    source: AllocationConfigSource::FromClaim,
                    requests: vec![],
                    opaque: None,
                }],
            },
            node_selector: None,
        };
        assert_eq!(
            serde_json::to_value(&allocation).unwrap(),
            json!({"devices": {
                "results": [{"request": "gpu", "driver": "d", "pool": "p", "device": "gpu-0"}],
                "config": [{"source": "FromClaim"}]
            }})
        );
    }
}
