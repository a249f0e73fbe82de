//! `DeviceClass` (cluster-scoped): the CEL selectors every device of the class meets and the
//! configuration its drivers get; and the selector and opaque configuration types that claims
//! use too.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ClusterResourceScope;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{api_version, nullable, v1_resource};

/// A `DeviceClass`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClass {
    /// Always `resource.k8s.io/v1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `DeviceClass`.
    #[serde(default = "DeviceClass::kind_name")]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The selectors and configuration.
    #[serde(default)]
    pub spec: DeviceClassSpec,
}

v1_resource!(DeviceClass, "deviceclasses", ClusterResourceScope, { spec });

impl DeviceClass {
    /// A class named `name` selecting the devices for which every CEL expression holds.
    pub fn with_cel(name: &str, expressions: &[&str]) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: DeviceClassSpec {
                selectors: expressions.iter().map(|e| DeviceSelector::cel(e)).collect(),
                ..DeviceClassSpec::default()
            },
            ..Self::default()
        }
    }
}

/// `DeviceClass.spec`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassSpec {
    /// All must match for a device to be in the class.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
    /// Passed to the drivers of the allocated devices; not used to allocate.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<DeviceClassConfiguration>,
    /// The extended resource name pods may ask for to get a device of this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_resource_name: Option<String>,
}

/// One selector; CEL is the only kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSelector {
    /// The CEL selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelDeviceSelector>,
}

impl DeviceSelector {
    /// The CEL selector `expression`.
    pub fn cel(expression: &str) -> Self {
        Self {
            cel: Some(CelDeviceSelector {
                expression: expression.to_owned(),
            }),
        }
    }
}

/// A CEL expression over `device` (`device.driver == 'gpu.example.com'`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CelDeviceSelector {
    /// The expression; it must evaluate to a bool.
    #[serde(default)]
    pub expression: String,
}

/// A class's configuration entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassConfiguration {
    /// The driver-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

/// Driver-specific configuration: `parameters` is a JSON object only `driver` interprets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpaqueDeviceConfiguration {
    /// The driver the parameters are for.
    #[serde(default)]
    pub driver: String,
    /// The parameters (a JSON object, at most 10 KiB).
    #[serde(default)]
    pub parameters: serde_json::Value,
}
