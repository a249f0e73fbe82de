//! A claim's `status.allocation`: the allocated devices, the configuration the classes and the
//! claim give them, and the nodes that can use them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{nullable, DeviceToleration, OpaqueDeviceConfiguration};

/// `source` of a configuration entry copied from the request's `DeviceClass`.
pub const FROM_CLASS: &str = "FromClass";
/// `source` of a configuration entry copied from the claim.
pub const FROM_CLAIM: &str = "FromClaim";

/// `status.allocation`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllocationResult {
    /// The allocated devices and their configuration.
    #[serde(default)]
    pub devices: DeviceAllocationResult,
    /// Where the devices can be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// When the devices were allocated (binding conditions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_timestamp: Option<Time>,
}

/// `status.allocation.devices`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationResult {
    /// One entry per allocated device.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<DeviceRequestAllocationResult>,
    /// Configuration from the classes and the claim, for the drivers to interpret.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<DeviceAllocationConfiguration>,
}

/// One allocated device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequestAllocationResult {
    /// The request it satisfies (`req` or `req/sub`).
    #[serde(default)]
    pub request: String,
    /// The driver of the device.
    #[serde(default)]
    pub driver: String,
    /// The pool of the device.
    #[serde(default)]
    pub pool: String,
    /// The device name in the pool.
    #[serde(default)]
    pub device: String,
    /// Set (to `true`) only for admin-access requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_access: Option<bool>,
    /// The request's tolerations when the device was allocated.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<DeviceToleration>,
    /// The device's binding conditions when it was allocated.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub binding_conditions: Vec<String>,
    /// The device's binding failure conditions when it was allocated.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub binding_failure_conditions: Vec<String>,
    /// Identifies this share of a device allocated more than once (a UID).
    #[serde(default, rename = "shareID", skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// What this allocation consumes of each capacity of a device allocated more than once.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub consumed_capacity: BTreeMap<String, Quantity>,
}

impl DeviceRequestAllocationResult {
    /// The device `device` of `driver`'s pool `pool`, allocated for `request`.
    pub fn new(request: &str, driver: &str, pool: &str, device: &str) -> Self {
        Self {
            request: request.to_owned(),
            driver: driver.to_owned(),
            pool: pool.to_owned(),
            device: device.to_owned(),
            ..Self::default()
        }
    }
}

/// One configuration entry of an allocation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationConfiguration {
    /// [`FROM_CLASS`] or [`FROM_CLAIM`].
    #[serde(default)]
    pub source: String,
    /// The requests it applies to; empty means all of the claim's.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// The driver-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

impl DeviceAllocationConfiguration {
    /// An opaque entry for `driver` from `source` ([`FROM_CLASS`] or [`FROM_CLAIM`]), limited to
    /// `requests` (none: all).
    pub fn opaque(
        source: &str,
        requests: &[&str],
        driver: &str,
        parameters: serde_json::Value,
    ) -> Self {
        Self {
            source: source.to_owned(),
            requests: requests.iter().map(|r| (*r).to_owned()).collect(),
            opaque: Some(OpaqueDeviceConfiguration {
                driver: driver.to_owned(),
                parameters,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_allocation_is_written_in_the_api_shape() {
        let allocation = AllocationResult {
            devices: DeviceAllocationResult {
                results: vec![DeviceRequestAllocationResult::new("gpu", "d", "p", "gpu-0")],
                config: vec![DeviceAllocationConfiguration {
                    source: FROM_CLAIM.into(),
                    requests: vec![],
                    opaque: None,
                }],
            },
            ..AllocationResult::default()
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
