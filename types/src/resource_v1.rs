//! Hand-written serde types for the `resource.k8s.io/v1` objects the agent reads and writes on
//! Kubernetes 1.34+ (k8s-openapi's `v1_30` has none): `ResourceSlice`, the part of
//! `ResourceClaim` a node driver needs, and `DeviceClass`. Field names are the API's (camelCase);
//! optional and empty fields are left out when writing, and fields not modelled here are ignored
//! when reading.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Serialize};

/// The API group of DRA.
pub const GROUP: &str = "resource.k8s.io";
/// The API version these types model.
pub const VERSION: &str = "v1";
/// `apiVersion` of every object here.
pub const API_VERSION: &str = "resource.k8s.io/v1";

fn api_version() -> String {
    API_VERSION.to_owned()
}

/// `kube::Resource` for a type with `metadata: ObjectMeta`, fixed group `resource.k8s.io` and
/// version `v1` (no dynamic type information: `DynamicType = ()`).
macro_rules! v1_resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind((): &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group((): &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version((): &()) -> Cow<'_, str> {
                Cow::Borrowed(VERSION)
            }
            fn api_version((): &()) -> Cow<'_, str> {
                Cow::Borrowed(API_VERSION)
            }
            fn plural((): &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// ResourceSlice

/// A `ResourceSlice` (cluster-scoped): some or all devices of one pool of one driver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The driver, pool, node and devices.
    pub spec: ResourceSliceSpec,
}

impl ResourceSlice {
    fn kind_name() -> String {
        "ResourceSlice".to_owned()
    }

    /// A slice with `metadata` and `spec`, `apiVersion` and `kind` set.
    pub fn new(metadata: ObjectMeta, spec: ResourceSliceSpec) -> Self {
        Self {
            api_version: api_version(),
            kind: Self::kind_name(),
            metadata,
            spec,
        }
    }
}

v1_resource!(
    ResourceSlice,
    "ResourceSlice",
    "resourceslices",
    ClusterResourceScope
);

/// `ResourceSlice.spec`, the node-local subset: the node is named by `nodeName`
/// (`nodeSelector`, `allNodes` and the alpha fields are not modelled).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    /// The driver's name (a DNS subdomain, `gpu.example.com`); also the implicit domain of
    /// unqualified attribute and capacity names.
    pub driver: String,
    /// The pool this slice belongs to.
    pub pool: ResourcePool,
    /// The node whose devices these are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The devices (at most [`MAX_DEVICES_PER_SLICE`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
}

/// At most this many devices in one slice (API `ResourceSliceMaxDevices`).
pub const MAX_DEVICES_PER_SLICE: usize = 128;
/// At most this many attributes and capacities together per device
/// (API `ResourceSliceMaxAttributesAndCapacitiesPerDevice`).
pub const MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE: usize = 32;
/// At most this many bytes in a `string` or `version` attribute value.
pub const MAX_ATTRIBUTE_VALUE_LENGTH: usize = 64;

/// `spec.pool`: consumers use only the slices of a pool's highest `generation`, and the pool is
/// complete when that many slices as `resourceSliceCount` are seen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePool {
    /// The pool name (one or more DNS subdomains joined by `/`).
    pub name: String,
    /// Incremented whenever the pool changes.
    pub generation: i64,
    /// How many slices the pool has at this generation (> 0).
    pub resource_slice_count: i64,
}

/// One device of a slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// The device name (a DNS label), unique in the pool.
    pub name: String,
    /// Attributes by name (`<id>` or `<domain>/<id>`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// Capacities by name (same naming rules as attributes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, DeviceCapacity>,
}

/// An attribute value: exactly one of `int`, `bool`, `string`, `version` (`{"int": 3}`).
///
/// (De)serialized through a struct of four optional fields, as the API defines it: a plain
/// enum would come out of `serde_yaml` as a YAML tag (`!int 3`) instead of a map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "AttributeFields", try_from = "AttributeFields")]
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

/// The wire form of [`DeviceAttribute`].
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AttributeFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    int: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bool: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    string: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

impl From<DeviceAttribute> for AttributeFields {
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

impl TryFrom<AttributeFields> for DeviceAttribute {
    type Error = &'static str;

    fn try_from(fields: AttributeFields) -> Result<Self, Self::Error> {
        match fields {
            AttributeFields {
                int: Some(i),
                bool: None,
                string: None,
                version: None,
            } => Ok(Self::Int(i)),
            AttributeFields {
                int: None,
                bool: Some(b),
                string: None,
                version: None,
            } => Ok(Self::Bool(b)),
            AttributeFields {
                int: None,
                bool: None,
                string: Some(s),
                version: None,
            } => Ok(Self::String(s)),
            AttributeFields {
                int: None,
                bool: None,
                string: None,
                version: Some(v),
            } => Ok(Self::Version(v)),
            _ => Err("a device attribute needs exactly one of int, bool, string, version"),
        }
    }
}

/// A capacity: a quantity such as `80Gi`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCapacity {
    /// The amount.
    pub value: Quantity,
}

// ---------------------------------------------------------------------------------------------
// ResourceClaim

/// A `ResourceClaim` (namespaced), as the agent reads it: metadata (the UID a prepare names),
/// the spec untyped, and the allocation in the status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaim {
    /// Always `resource.k8s.io/v1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `ResourceClaim`.
    #[serde(default = "ResourceClaim::kind_name")]
    pub kind: String,
    /// Object metadata; `uid` identifies the claim in prepare calls.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The requests, constraints and config, not interpreted by the agent.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub spec: serde_json::Value,
    /// The allocation, once the scheduler made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResourceClaimStatus>,
}

impl ResourceClaim {
    fn kind_name() -> String {
        "ResourceClaim".to_owned()
    }

    /// The claim `namespace/name` with `uid`, without spec or status.
    pub fn new(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            api_version: api_version(),
            kind: Self::kind_name(),
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                uid: Some(uid.to_owned()),
                ..ObjectMeta::default()
            },
            spec: serde_json::Value::Null,
            status: None,
        }
    }

    /// The claim with `devices` as its allocation, as the scheduler writes it.
    #[must_use]
    pub fn allocated(mut self, devices: DeviceAllocationResult) -> Self {
        self.status = Some(ResourceClaimStatus {
            allocation: Some(AllocationResult { devices }),
        });
        self
    }
}

v1_resource!(
    ResourceClaim,
    "ResourceClaim",
    "resourceclaims",
    NamespaceResourceScope
);

/// `ResourceClaim.status`, the allocation only (`reservedFor` and `devices` not modelled).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimStatus {
    /// Set once the claim is allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationResult>,
}

/// `status.allocation` (`nodeSelector` not modelled).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocationResult {
    /// The allocated devices and their configuration.
    #[serde(default)]
    pub devices: DeviceAllocationResult,
}

/// `status.allocation.devices`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationResult {
    /// One entry per allocated device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<DeviceRequestAllocationResult>,
    /// Configuration from the classes and the claim, for the drivers to interpret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<DeviceAllocationConfiguration>,
}

/// One allocated device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequestAllocationResult {
    /// The request it satisfies (`req` or `req/sub`).
    pub request: String,
    /// The driver of the device.
    pub driver: String,
    /// The pool of the device.
    pub pool: String,
    /// The device name in the pool.
    pub device: String,
    /// Set (to `true`) only for admin-access requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_access: Option<bool>,
}

impl DeviceRequestAllocationResult {
    /// The device `device` of `driver`'s pool `pool`, allocated for `request`.
    pub fn new(request: &str, driver: &str, pool: &str, device: &str) -> Self {
        Self {
            request: request.to_owned(),
            driver: driver.to_owned(),
            pool: pool.to_owned(),
            device: device.to_owned(),
            admin_access: None,
        }
    }
}

/// One configuration entry of an allocation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationConfiguration {
    /// `FromClass` or `FromClaim`.
    #[serde(default)]
    pub source: String,
    /// The requests it applies to; empty means all of the claim's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// The driver-specific parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

impl DeviceAllocationConfiguration {
    /// An opaque entry for `driver` from `source` (`FromClass` or `FromClaim`), limited to
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

/// Driver-specific configuration: `parameters` is a JSON object only `driver` interprets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpaqueDeviceConfiguration {
    /// The driver the parameters are for.
    pub driver: String,
    /// The parameters (a JSON object, at most 10 KiB).
    pub parameters: serde_json::Value,
}

// ---------------------------------------------------------------------------------------------
// DeviceClass

/// A `DeviceClass` (cluster-scoped): the devices a request of the class may get.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The selectors.
    pub spec: DeviceClassSpec,
}

impl DeviceClass {
    fn kind_name() -> String {
        "DeviceClass".to_owned()
    }

    /// A class named `name` selecting the devices for which every CEL expression holds.
    pub fn with_cel(name: &str, expressions: &[&str]) -> Self {
        Self {
            api_version: api_version(),
            kind: Self::kind_name(),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: DeviceClassSpec {
                selectors: expressions
                    .iter()
                    .map(|e| DeviceSelector {
                        cel: Some(CelDeviceSelector {
                            expression: (*e).to_owned(),
                        }),
                    })
                    .collect(),
            },
        }
    }
}

v1_resource!(
    DeviceClass,
    "DeviceClass",
    "deviceclasses",
    ClusterResourceScope
);

/// `DeviceClass.spec` (`config` and `extendedResourceName` not modelled).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassSpec {
    /// All must match for a device to be in the class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
}

/// One selector; CEL is the only kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSelector {
    /// The CEL selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelDeviceSelector>,
}

/// A CEL expression over `device` (`device.driver == 'gpu.example.com'`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CelDeviceSelector {
    /// The expression; it must evaluate to a bool.
    pub expression: String,
}
