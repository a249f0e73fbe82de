//! Conversion of parameter objects into the allocator's model. Every error names the field that
//! is wrong (`spec.selector[1].operator`) and why; nothing here panics on bad input.

use dra_allocator::model::{
    ClaimRequest, ClassDefaults, Operator, Policy, Requirement, Sharing, ValidationError, MAX_COUNT,
};

use super::crd::{
    DeviceClaimParametersSpec, DeviceClassParametersSpec, RequirementSpec, SharingSpec,
};

/// Invalid parameters: the field and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParamsError(#[from] pub ValidationError);

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ParamsError {
    ParamsError(ValidationError::new(field, reason))
}

fn requirements(specs: &[RequirementSpec], path: &str) -> Result<Vec<Requirement>, ParamsError> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let at = format!("{path}[{i}]");
            if spec.attribute.trim().is_empty() {
                return Err(invalid(format!("{at}.attribute"), "must not be empty"));
            }
            let operator: Operator = spec
                .operator
                .parse()
                .map_err(|e| invalid(format!("{at}.operator"), format!("{e}")))?;
            let requirement = Requirement {
                attribute: spec.attribute.clone(),
                operator,
                values: spec.values.clone(),
            };
            requirement.validate(&at)?;
            Ok(requirement)
        })
        .collect()
}

fn sharing(spec: Option<&SharingSpec>, path: &str) -> Result<Option<Sharing>, ParamsError> {
    let Some(spec) = spec else { return Ok(None) };
    match spec.mode.as_deref().unwrap_or("Exclusive") {
        "Exclusive" => {
            if spec.max_consumers.is_some() {
                return Err(invalid(
                    format!("{path}.maxConsumers"),
                    "only allowed with mode Shared",
                ));
            }
            Ok(Some(Sharing::Exclusive))
        }
        "Shared" => match spec.max_consumers {
            None => Err(invalid(
                format!("{path}.maxConsumers"),
                "required with mode Shared",
            )),
            Some(0) => Err(invalid(
                format!("{path}.maxConsumers"),
                "must be at least 1, got 0",
            )),
            Some(max_consumers) => Ok(Some(Sharing::Shared { max_consumers })),
        },
        other => Err(invalid(
            format!("{path}.mode"),
            format!("unknown mode {other:?}: expected Exclusive or Shared"),
        )),
    }
}

/// The class defaults described by a `DeviceClassParameters` spec.
pub fn class_defaults(spec: &DeviceClassParametersSpec) -> Result<ClassDefaults, ParamsError> {
    let policy = match spec.policy.as_deref().unwrap_or("Pack") {
        "Pack" => Policy::Pack,
        "Spread" => Policy::Spread,
        other => {
            return Err(invalid(
                "spec.policy",
                format!("unknown policy {other:?}: expected Pack or Spread"),
            ))
        }
    };
    let defaults = ClassDefaults {
        selector: requirements(&spec.selector, "spec.selector")?,
        policy,
        sharing: sharing(spec.sharing.as_ref(), "spec.sharing")?,
    };
    defaults.validate()?;
    Ok(defaults)
}

/// The request described by a `DeviceClaimParameters` spec, with its `shareable` flag.
pub fn claim_request(
    spec: &DeviceClaimParametersSpec,
) -> Result<(ClaimRequest, bool), ParamsError> {
    let count = spec.count.unwrap_or(1);
    let count = u8::try_from(count)
        .ok()
        .filter(|c| (1..=MAX_COUNT).contains(c))
        .ok_or_else(|| {
            invalid(
                "spec.count",
                format!("must be between 1 and {MAX_COUNT}, got {count}"),
            )
        })?;
    let request = ClaimRequest {
        count,
        selector: requirements(&spec.selector, "spec.selector")?,
        sharing: sharing(spec.sharing.as_ref(), "spec.sharing")?,
        same_attribute: spec.same_attribute.clone(),
    };
    request.validate()?;
    Ok((request, spec.shareable.unwrap_or(false)))
}
