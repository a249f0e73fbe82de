//! Resolution of `parametersRef` of classes and claims: the reference is checked (API group and
//! kind of this driver), the object read through [`super::DriverCluster`] and converted by
//! [`crate::params`]. Every error names the field or object at fault. A class's claim defaults
//! fill what a claim's parameters leave out, and are the whole request of a claim without any.

use dra_allocator::model::EffectiveRequest;
use k8s_openapi::api::resource::v1alpha2::{ResourceClaim, ResourceClass};
use kube::ResourceExt;

use super::{ClaimParameters, DriverError, LedgerDriver, Result};
use crate::params::{self, ClassParameters, API_GROUP};

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
    /// The parameters of `class`: its `DeviceClassParameters`, or none.
    pub(crate) async fn class_parameters(&self, class: &ResourceClass) -> Result<ClassParameters> {
        let Some(reference) = &class.parameters_ref else {
            return Ok(ClassParameters::default());
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
        params::class_parameters(&object.spec).map_err(|source| DriverError::InvalidParameters {
            kind: CLASS_KIND,
            name,
            source,
        })
    }

    /// The claim's request with `class` applied: its `DeviceClaimParameters` with the class's
    /// claim defaults filled in, or (without parameters) the class's claim defaults: by default
    /// one device matching the class, with the class's sharing.
    pub(crate) async fn claim_request(
        &self,
        claim: &ResourceClaim,
        class: &ClassParameters,
    ) -> Result<ClaimParameters> {
        let invalid_class = |source| DriverError::InvalidParameters {
            kind: CLASS_KIND,
            name: claim.spec.resource_class_name.clone(),
            source: params::ParamsError(source),
        };
        let Some(reference) = &claim.spec.parameters_ref else {
            let (request, shareable) = params::default_claim_request(&class.claims);
            return Ok(ClaimParameters {
                request: EffectiveRequest::combine(&class.defaults, &request)
                    .map_err(invalid_class)?,
                shareable,
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
        let (request, shareable) =
            params::claim_request_with(&object.spec, &class.claims).map_err(invalid)?;
        let request = EffectiveRequest::combine(&class.defaults, &request)
            .map_err(|e| invalid(params::ParamsError(e)))?;
        Ok(ClaimParameters { request, shareable })
    }
}
