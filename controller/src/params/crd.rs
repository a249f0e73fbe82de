//! The parameter custom resources as Rust types. `dra-ledger crds` prints the manifests generated
//! from these, and `deploy/base/crds.yaml` is checked against that output.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of the parameter objects.
pub const API_GROUP: &str = "dra-ledger.io";
/// The API version of the parameter objects.
pub const API_VERSION: &str = "v1alpha1";

/// One selector requirement as written in a parameter object: `{attribute, operator, values}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequirementSpec {
    /// The device attribute to look at, e.g. `model`.
    pub attribute: String,
    /// One of `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`.
    pub operator: String,
    /// The values to compare with; none for `Exists`/`DoesNotExist`, exactly one for `Gt`/`Lt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// Device sharing between claims.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharingSpec {
    /// `Exclusive` (default) or `Shared`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// With `Shared`: how many claims may hold one device at once (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_consumers: Option<u32>,
}

/// Parameters of a `ResourceClass` of this driver: what every device of the class must meet and
/// how its claims are placed.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "dra-ledger.io",
    version = "v1alpha1",
    kind = "DeviceClassParameters",
    plural = "deviceclassparameters",
    shortname = "dcp",
    doc = "Class parameters of the dra-ledger driver, referenced by ResourceClass.parametersRef"
)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassParametersSpec {
    /// Requirements every device of the class must meet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selector: Vec<RequirementSpec>,
    /// `Pack` (default): fill the busiest node that fits; `Spread`: the emptiest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Default sharing for claims of the class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<SharingSpec>,
    /// Default `count` for claims of the class (1..=16; a claim's own `spec.count` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Default `sameAttribute` for claims of the class (a claim's own value wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_attribute: Option<String>,
    /// Default `shareable` for claims of the class: whether several pods may use one claim at
    /// once (a claim's own `spec.shareable` wins; false when neither sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shareable: Option<bool>,
}

/// Parameters of one `ResourceClaim`: how many devices, which ones, and how they are shared.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "dra-ledger.io",
    version = "v1alpha1",
    kind = "DeviceClaimParameters",
    plural = "deviceclaimparameters",
    shortname = "dclp",
    namespaced,
    doc = "Claim parameters of the dra-ledger driver, referenced by ResourceClaim.spec.parametersRef"
)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaimParametersSpec {
    /// How many devices (1..=16, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Requirements each device must meet, in addition to the class selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selector: Vec<RequirementSpec>,
    /// Device sharing between claims; the class default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<SharingSpec>,
    /// All devices of the claim must carry the same value of this attribute (e.g. `numa`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_attribute: Option<String>,
    /// Whether several pods may use the claim at once (the allocation's `shareable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shareable: Option<bool>,
}

/// The CRD manifests of the parameter objects as one multi-document YAML text.
pub fn crd_manifests() -> String {
    use kube::CustomResourceExt;
    let docs = [DeviceClassParameters::crd(), DeviceClaimParameters::crd()];
    let mut out = String::new();
    for crd in &docs {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(crd).expect("a CRD always serializes to YAML"));
    }
    out
}
