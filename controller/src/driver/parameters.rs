//! Resolution of `parametersRef` of classes and claims: the reference is checked (API group and
//! kind of this driver), the object read through [`super::DriverCluster`] and converted by
//! [`crate::params`]. Every error names the field or object at fault.

use dra_allocator::model::{ClassDefaults, EffectiveRequest};
use k8s_openapi::api::resource::v1alpha2::{ResourceClaim, ResourceClass};
use kube::ResourceExt;

use super::{ClaimParameters, DriverError, LedgerDriver, Result};
use crate::params::{self, API_GROUP};

const CLASS_KIND: &str = "DeviceClassParameters";
const CLAIM_KIND: &str = "DeviceClaimParameters";

fn check_ref(api_group: Option<&str>, kind: &str, expected_kind: &'static str) -> Result<()> {
    if api_group != Some(API_GROUP) {
        return Err(DriverError::ParametersRef {
            field: "parametersRef.apiGroup",
            reason: format!("expected {API_GROUP}, got {:?}", api_group.unwrap_or("")),
        });
    }
    if kind != expected_kind {
        return Err(DriverError::ParametersRef {
            field: "parametersRef.kind",
            reason: format!("expected {expected_kind}, got {kind:?}"),
        });
    }
    Ok(())
}

impl LedgerDriver {
    /// The class defaults of `class`: its `DeviceClassParameters`, or none.
    pub(crate) async fn class_defaults(&self, class: &ResourceClass) -> Result<ClassDefaults> {
        let Some(reference) = &class.parameters_ref else {
            return Ok(ClassDefaults::default());
        };
        check_ref(reference.api_group.as_deref(), &reference.kind, CLASS_KIND)?;
        let name = reference.name.clone();
        let object = self
            .cluster
            .class_parameters(&name)
            .await
            .map_err(|source| DriverError::ParametersRead {
                kind: CLASS_KIND,
                name: name.clone(),
                source,
            })?
            .ok_or_else(|| DriverError::ParametersNotFound {
                kind: CLASS_KIND,
                name: name.clone(),
            })?;
        params::class_defaults(&object.spec).map_err(|source| DriverError::InvalidParameters {
            kind: CLASS_KIND,
            name,
            source,
        })
    }

    /// The claim's request with `class` applied: its `DeviceClaimParameters`, or one exclusive
    /// device matching the class.
    pub(crate) async fn claim_request(
        &self,
        claim: &ResourceClaim,
        class: &ClassDefaults,
    ) -> Result<ClaimParameters> {
        let invalid_class = |source| DriverError::InvalidParameters {
            kind: CLASS_KIND,
            name: claim.spec.resource_class_name.clone(),
            source: params::ParamsError(source),
        };
        let Some(reference) = &claim.spec.parameters_ref else {
            return Ok(ClaimParameters {
                request: EffectiveRequest::from_class(class).map_err(invalid_class)?,
                shareable: false,
            });
        };
        check_ref(reference.api_group.as_deref(), &reference.kind, CLAIM_KIND)?;
        let namespace = claim.namespace().unwrap_or_default();
        let name = format!("{namespace}/{}", reference.name);
        let object = self
            .cluster
            .claim_parameters(&namespace, &reference.name)
            .await
            .map_err(|source| DriverError::ParametersRead {
                kind: CLAIM_KIND,
                name: name.clone(),
                source,
            })?
            .ok_or_else(|| DriverError::ParametersNotFound {
                kind: CLAIM_KIND,
                name: name.clone(),
            })?;
        let invalid = |source| DriverError::InvalidParameters {
            kind: CLAIM_KIND,
            name: name.clone(),
            source,
        };
        let (request, shareable) = params::claim_request(&object.spec).map_err(invalid)?;
        let request = EffectiveRequest::combine(class, &request)
            .map_err(|e| invalid(params::ParamsError(e)))?;
        Ok(ClaimParameters { request, shareable })
    }
}
