//! Serde types of the `resource.k8s.io/v1` objects (Kubernetes 1.34+; k8s-openapi's `v1_30` has
//! none): the one model of them in the workspace, which the node agent, the controller's mirror
//! and the simulated control plane (its actors and its API server) all read and write.
//!
//! - [`DeviceClass`] (`class`): selectors and configuration;
//! - [`ResourceClaim`] and [`ResourceClaimTemplate`] (`claim`): the spec's requests (`request`),
//!   the status with the allocation (`allocation`), `reservedFor` and the drivers' device status;
//! - [`ResourceSlice`] (`slice`): a pool's devices with their attributes and capacities.
//!
//! - [`DeviceTaintRule`] (`taint`): a taint for the devices a selector matches; with the
//!   device taints and request tolerations;
//! - the partitioning and sharing fields (`sharing`): counter sets, counter consumption,
//!   capacity request policies and a request's capacity requirements.
//!
//! The shape is the API's JSON, as kube-apiserver decodes and encodes it: field names are the
//! API's (camelCase); a missing field reads as its zero value and a `null` list or map as empty;
//! unset options and empty lists and maps are left out when writing (`omitempty`). Every field
//! of the `v1` API up to Kubernetes 1.37 that the workspace uses is modelled: the GA ones and
//! those of the prioritized list, admin access, claim device status, device taints and
//! tolerations, extended resource names, partitionable devices, consumable capacity and
//! binding conditions, so an object read and written again loses none of them. Which of those
//! fields a server keeps depends on its feature gates; that is the server's decision (the
//! simulator's `dropDisabledFields`), not the model's. The one stricter rule than the server's:
//! an attribute value must set exactly one of its four fields ([`DeviceAttribute`]);
//! [`DeviceAttributeFields`] is the API's looser form.
//!
//! Types, constructors and accessors only: no behaviour of the agent, the controller or the
//! simulator lives here.

mod allocation;
mod claim;
mod class;
mod request;
mod sharing;
mod slice;
mod taint;

use serde::{Deserialize, Deserializer};

pub use allocation::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceRequestAllocationResult, FROM_CLAIM, FROM_CLASS,
};
pub use claim::{
    AllocatedDeviceStatus, NetworkDeviceData, ResourceClaim, ResourceClaimConsumerReference,
    ResourceClaimSpec, ResourceClaimStatus, ResourceClaimTemplate, ResourceClaimTemplateSpec,
    DELETE_PROTECTION_FINALIZER,
};
pub use class::{
    CelDeviceSelector, DeviceClass, DeviceClassConfiguration, DeviceClassSpec, DeviceSelector,
    OpaqueDeviceConfiguration,
};
pub use request::{
    allocation_mode, exact_count, DeviceClaim, DeviceClaimConfiguration, DeviceConstraint,
    DeviceRequest, DeviceSubRequest, ExactDeviceRequest, ALL, EXACT_COUNT,
};
pub use sharing::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, CapacityRequirements, Counter, CounterSet,
    DeviceCounterConsumption,
};
pub use slice::{
    AttributeValueCount, Device, DeviceAttribute, DeviceAttributeFields, DeviceCapacity,
    ResourcePool, ResourceSlice, ResourceSliceSpec, MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
    MAX_ATTRIBUTE_VALUE_LENGTH, MAX_DEVICES_PER_SLICE,
};
pub use taint::{
    prevents_allocation, rule_selects, tolerates, DeviceTaint, DeviceTaintRule,
    DeviceTaintRuleSpec, DeviceTaintRuleStatus, DeviceTaintSelector, DeviceToleration, EFFECT_NONE,
    MAX_TAINTS_PER_DEVICE, MAX_TOLERATIONS, NO_EXECUTE, NO_SCHEDULE, OP_EQUAL, OP_EXISTS,
    TAINT_EFFECTS,
};

/// The API group of DRA.
pub const GROUP: &str = "resource.k8s.io";
/// The API version these types model.
pub const VERSION: &str = "v1";
/// `apiVersion` of every object here.
pub const API_VERSION: &str = "resource.k8s.io/v1";

fn api_version() -> String {
    API_VERSION.to_owned()
}

/// A list or map that may be `null` on the wire: `null` reads as empty, as Go decodes it.
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// For an object type with `apiVersion`, `kind`, `metadata` and fields that have defaults:
/// `kube::Resource` (fixed group `resource.k8s.io` and version `v1`, no dynamic type
/// information), `Default` with `apiVersion` and `kind` set, and the `kind` default that serde
/// uses for list items without one.
macro_rules! v1_resource {
    ($ty:ident, $plural:literal, $scope:ty, { $($field:ident),* }) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind((): &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed(stringify!($ty))
            }
            fn group((): &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($crate::resource_v1::GROUP)
            }
            fn version((): &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($crate::resource_v1::VERSION)
            }
            fn api_version((): &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($crate::resource_v1::API_VERSION)
            }
            fn plural((): &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($plural)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }

        impl $ty {
            fn kind_name() -> String {
                stringify!($ty).to_owned()
            }
        }

        impl Default for $ty {
            fn default() -> Self {
                Self {
                    api_version: $crate::resource_v1::api_version(),
                    kind: Self::kind_name(),
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::default(),
                    $($field: Default::default(),)*
                }
            }
        }
    };
}
use v1_resource;
