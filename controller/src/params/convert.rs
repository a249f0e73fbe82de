//! Conversion of parameter objects into the allocator's model. Every error names the field that
//! is wrong (`spec.selector[1].operator`) and why; nothing here panics on bad input.
//!
//! A class's parameters also carry defaults for its claims ([`ClaimDefaults`]: `count`,
//! `sameAttribute`, `shareable`); a claim's own value wins, and a claim without parameters gets
//! the defaults as they are.

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

/// What a class sets for the claims of the class that do not set it themselves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimDefaults {
    /// Default device count (1..=16).
    pub count: Option<u8>,
    /// Default `sameAttribute`.
    pub same_attribute: Option<String>,
    /// Default `shareable`.
    pub shareable: Option<bool>,
}

/// The whole of a `DeviceClassParameters` spec: what every device of the class meets and how
/// claims are placed ([`ClassDefaults`]), and the defaults of its claims.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassParameters {
    /// Selector, policy and default sharing.
    pub defaults: ClassDefaults,
    /// Defaults of the claims' own fields.
    pub claims: ClaimDefaults,
}

fn count(value: Option<i64>) -> Result<Option<u8>, ParamsError> {
    let Some(count) = value else { return Ok(None) };
    u8::try_from(count)
        .ok()
        .filter(|c| (1..=MAX_COUNT).contains(c))
        .map(Some)
        .ok_or_else(|| {
            invalid(
                "spec.count",
                format!("must be between 1 and {MAX_COUNT}, got {count}"),
            )
        })
}

fn same_attribute(value: Option<&String>) -> Result<Option<String>, ParamsError> {
    match value {
        Some(attribute) if attribute.trim().is_empty() => {
            Err(invalid("spec.sameAttribute", "must not be empty when set"))
        }
        other => Ok(other.cloned()),
    }
}

/// The claim defaults of a `DeviceClassParameters` spec; errors name the field under `spec.`.
pub fn claim_defaults(spec: &DeviceClassParametersSpec) -> Result<ClaimDefaults, ParamsError> {
    Ok(ClaimDefaults {
        count: count(spec.count)?,
        same_attribute: same_attribute(spec.same_attribute.as_ref())?,
        shareable: spec.shareable,
    })
}

/// Everything a `DeviceClassParameters` spec says: [`class_defaults`] and [`claim_defaults`].
pub fn class_parameters(spec: &DeviceClassParametersSpec) -> Result<ClassParameters, ParamsError> {
    Ok(ClassParameters {
        defaults: class_defaults(spec)?,
        claims: claim_defaults(spec)?,
    })
}

/// The request of a claim without parameters in a class with these defaults, with its
/// `shareable` flag.
pub fn default_claim_request(defaults: &ClaimDefaults) -> (ClaimRequest, bool) {
    let request = ClaimRequest {
        count: defaults.count.unwrap_or(1),
        same_attribute: defaults.same_attribute.clone(),
        ..ClaimRequest::default()
    };
    (request, defaults.shareable.unwrap_or(false))
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

/// The request described by a `DeviceClaimParameters` spec, with its `shareable` flag (no
/// class defaults: see [`claim_request_with`]).
pub fn claim_request(
    spec: &DeviceClaimParametersSpec,
) -> Result<(ClaimRequest, bool), ParamsError> {
    claim_request_with(spec, &ClaimDefaults::default())
}

/// The request described by a `DeviceClaimParameters` spec with the class's claim defaults filled
/// in where the spec leaves a field out, with its `shareable` flag.
pub fn claim_request_with(
    spec: &DeviceClaimParametersSpec,
    defaults: &ClaimDefaults,
) -> Result<(ClaimRequest, bool), ParamsError> {
    let request = ClaimRequest {
        count: count(spec.count)?.or(defaults.count).unwrap_or(1),
        selector: requirements(&spec.selector, "spec.selector")?,
        sharing: sharing(spec.sharing.as_ref(), "spec.sharing")?,
        same_attribute: same_attribute(spec.same_attribute.as_ref())?
            .or_else(|| defaults.same_attribute.clone()),
    };
    request.validate()?;
    let shareable = spec.shareable.or(defaults.shareable).unwrap_or(false);
    Ok((request, shareable))
}
