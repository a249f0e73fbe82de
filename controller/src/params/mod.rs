//! Driver parameters: the `dra-ledger.io/v1alpha1` custom resources (`DeviceClassParameters`,
//! `DeviceClaimParameters`) generated from Rust types, and their conversion into the allocator's
//! model with validation errors that name the field.
//!
//! Owns only the shape of the parameter objects; reads nothing from the cluster itself.

mod convert;
mod crd;

pub use convert::{
    claim_defaults, claim_request, claim_request_with, class_defaults, class_parameters,
    default_claim_request, ClaimDefaults, ClassParameters, ParamsError,
};
pub use crd::{
    crd_manifests, DeviceClaimParameters, DeviceClaimParametersSpec, DeviceClassParameters,
    DeviceClassParametersSpec, RequirementSpec, SharingSpec, API_GROUP, API_VERSION,
};
