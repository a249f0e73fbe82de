//! `ResourceSlice` (cluster-scoped): some or all devices of one pool of one driver, where they
//! can be used (a node, the nodes of a selector, or every node), and each device's attributes
//! and capacities; with the API's limits on them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ClusterResourceScope;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    api_version, nullable, v1_resource, CapacityRequestPolicy, CounterSet,
    DeviceCounterConsumption, DeviceTaint,
};

/// At most this many devices in one slice (API `ResourceSliceMaxDevices`).
pub const MAX_DEVICES_PER_SLICE: usize = 128;
/// At most this many attributes and capacities together per device
/// (API `ResourceSliceMaxAttributesAndCapacitiesPerDevice`).
pub const MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE: usize = 32;
/// At most this many bytes in a `string` or `version` attribute value.
pub const MAX_ATTRIBUTE_VALUE_LENGTH: usize = 64;

/// A `ResourceSlice`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSlice {
    /// Always `resource.k8s.io/v1` (list items may omit it; it is filled in when read).
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `ResourceSlice`.
    #[serde(default = "ResourceSlice::kind_name")]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The driver, pool, where the devices are, and the devices.
    #[serde(default)]
    pub spec: ResourceSliceSpec,
}

v1_resource!(ResourceSlice, "resourceslices", ClusterResourceScope, {
    spec
});

impl ResourceSlice {
    /// A slice with `metadata` and `spec`, `apiVersion` and `kind` set.
    pub fn new(metadata: ObjectMeta, spec: ResourceSliceSpec) -> Self {
        Self {
            metadata,
            spec,
            ..Self::default()
        }
    }
}

/// `ResourceSlice.spec`: exactly one of `nodeName`, `nodeSelector` and `allNodes` says where the
/// devices can be used.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    /// The driver's name (a DNS subdomain, `gpu.example.com`); also the implicit domain of
    /// unqualified attribute and capacity names.
    #[serde(default)]
    pub driver: String,
    /// The pool this slice belongs to.
    #[serde(default)]
    pub pool: ResourcePool,
    /// The node whose devices these are, for node-local slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The nodes that can reach the devices, for network-attached slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// The devices are reachable from every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_nodes: Option<bool>,
    /// Each device says where it can be used (partitionable devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_device_node_selection: Option<bool>,
    /// The devices (at most [`MAX_DEVICES_PER_SLICE`]).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
    /// Counter sets the devices draw from (partitionable devices).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared_counters: Vec<CounterSet>,
}

/// `spec.pool`: consumers use only the slices of a pool's highest `generation`, and the pool is
/// complete when that many slices as `resourceSliceCount` are seen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePool {
    /// The pool name (one or more DNS subdomains joined by `/`).
    #[serde(default)]
    pub name: String,
    /// Incremented whenever the pool changes.
    #[serde(default)]
    pub generation: i64,
    /// How many slices the pool has at this generation (> 0).
    #[serde(default)]
    pub resource_slice_count: i64,
}

/// One device of a slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// The device name (a DNS label), unique in the pool.
    #[serde(default)]
    pub name: String,
    /// Attributes by name (`<id>` or `<domain>/<id>`).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// Capacities by name (same naming rules as attributes).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, DeviceCapacity>,
    /// What the device consumes of the slice's counter sets (partitionable devices).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consumes_counters: Vec<DeviceCounterConsumption>,
    /// The node of the device, with `perDeviceNodeSelection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The nodes that reach the device, with `perDeviceNodeSelection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// Every node reaches the device, with `perDeviceNodeSelection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_nodes: Option<bool>,
    /// The driver's taints of the device (at most 4).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<DeviceTaint>,
    /// The device may be allocated to several requests at once (consumable capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_multiple_allocations: Option<bool>,
    /// The allocation is limited to the node chosen when allocating (binding conditions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binds_to_node: Option<bool>,
    /// Device conditions that must be true before a pod is bound (at most 4).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub binding_conditions: Vec<String>,
    /// Device conditions that mean binding failed (at most 4).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub binding_failure_conditions: Vec<String>,
}

/// An attribute value: exactly one of `int`, `bool`, `string`, `version` (`{"int": 3}`).
///
/// (De)serialized through [`DeviceAttributeFields`], as the API defines it: a plain enum would
/// come out of `serde_yaml` as a YAML tag (`!int 3`) instead of a map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(into = "DeviceAttributeFields", try_from = "DeviceAttributeFields")]
pub enum DeviceAttribute {
    /// A 64-bit integer.
    Int(i64),
    /// `true` or `false`.
    Bool(bool),
    /// A string of at most 64 bytes.
    String(String),
    /// A semantic version (semver 2.0.0) of at most 64 bytes.
    Version(String),
}

/// The wire form of an attribute value: the API's four optional fields, any number of them set.
/// [`DeviceAttribute`] takes only one set; an API server reads this form and leaves the rule to
/// validation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAttributeFields {
    /// A 64-bit integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int: Option<i64>,
    /// `true` or `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
    /// A string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// A semantic version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// An attribute value with none or several of its fields set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a device attribute needs exactly one of int, bool, string, version")]
pub struct AttributeValueCount;

impl From<DeviceAttribute> for DeviceAttributeFields {
    fn from(value: DeviceAttribute) -> Self {
        let mut out = Self::default();
        match value {
            DeviceAttribute::Int(i) => out.int = Some(i),
            DeviceAttribute::Bool(b) => out.bool = Some(b),
            DeviceAttribute::String(s) => out.string = Some(s),
            DeviceAttribute::Version(v) => out.version = Some(v),
        }
        out
    }
}

impl TryFrom<DeviceAttributeFields> for DeviceAttribute {
    type Error = AttributeValueCount;

    fn try_from(fields: DeviceAttributeFields) -> Result<Self, Self::Error> {
        match fields {
            DeviceAttributeFields {
                int: Some(i),
                bool: None,
                string: None,
                version: None,
            } => Ok(Self::Int(i)),
            DeviceAttributeFields {
                int: None,
                bool: Some(b),
                string: None,
                version: None,
            } => Ok(Self::Bool(b)),
            DeviceAttributeFields {
                int: None,
                bool: None,
                string: Some(s),
                version: None,
            } => Ok(Self::String(s)),
            DeviceAttributeFields {
                int: None,
                bool: None,
                string: None,
                version: Some(v),
            } => Ok(Self::Version(v)),
            _ => Err(AttributeValueCount),
        }
    }
}

/// A capacity: a quantity such as `80Gi`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCapacity {
    /// The amount.
    pub value: Quantity,
    /// How the capacity is consumed when the device is allocated more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_policy: Option<CapacityRequestPolicy>,
}

impl DeviceCapacity {
    /// A capacity of `value` without a request policy.
    pub fn new(value: Quantity) -> Self {
        Self {
            value,
            request_policy: None,
        }
    }
}
