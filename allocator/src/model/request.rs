//! What a claim asks for: count, selector, sharing, placement policy and `sameAttribute`, the
//! class defaults, their validation and the combined [`EffectiveRequest`]. Pure data.

use serde::{Deserialize, Serialize};

use super::{Requirement, ValidationError};

/// The most devices one claim may ask for.
pub const MAX_COUNT: u8 = 16;

/// Whether a device is given to one claim or shared between several.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Sharing {
    /// The claim holds the device alone.
    #[default]
    Exclusive,
    /// Up to `max_consumers` claims may hold the device at once.
    #[serde(rename_all = "camelCase")]
    Shared {
        /// How many claims may share one device (at least 1).
        max_consumers: u32,
    },
}

impl Sharing {
    fn validate(self, path: &str) -> Result<(), ValidationError> {
        match self {
            Sharing::Shared { max_consumers: 0 } => Err(ValidationError::new(
                format!("{path}.maxConsumers"),
                "must be at least 1, got 0",
            )),
            _ => Ok(()),
        }
    }
}

/// Where a class places its claims among nodes that fit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Policy {
    /// Fill the busiest node that fits.
    #[default]
    Pack,
    /// Use the emptiest node that fits.
    Spread,
}

/// The parameters of one claim (`DeviceClaimParameters.spec`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimRequest {
    /// How many devices (1..=16).
    pub count: u8,
    /// Requirements each device must meet, in addition to the class selector.
    pub selector: Vec<Requirement>,
    /// Device sharing; `None` takes the class default, or exclusive.
    pub sharing: Option<Sharing>,
    /// When set, all devices of the claim carry the same value of this attribute.
    pub same_attribute: Option<String>,
}

impl Default for ClaimRequest {
    fn default() -> Self {
        ClaimRequest {
            count: 1,
            selector: Vec::new(),
            sharing: None,
            same_attribute: None,
        }
    }
}

fn validate_selector(selector: &[Requirement], path: &str) -> Result<(), ValidationError> {
    selector
        .iter()
        .enumerate()
        .try_for_each(|(i, r)| r.validate(&format!("{path}[{i}]")))
}

impl ClaimRequest {
    /// Checks the parameters; errors name the field under `spec.`.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if !(1..=MAX_COUNT).contains(&self.count) {
            return Err(ValidationError::new(
                "spec.count",
                format!("must be between 1 and {MAX_COUNT}, got {}", self.count),
            ));
        }
        validate_selector(&self.selector, "spec.selector")?;
        if let Some(sharing) = self.sharing {
            sharing.validate("spec.sharing")?;
        }
        if let Some(attribute) = &self.same_attribute {
            if attribute.trim().is_empty() {
                return Err(ValidationError::new(
                    "spec.sameAttribute",
                    "must not be empty when set",
                ));
            }
        }
        Ok(())
    }
}

/// The parameters of a device class (`DeviceClassParameters.spec`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClassDefaults {
    /// Requirements every device of the class meets.
    pub selector: Vec<Requirement>,
    /// How claims of the class are placed among nodes.
    pub policy: Policy,
    /// Sharing for claims that do not set their own.
    pub sharing: Option<Sharing>,
}

impl ClassDefaults {
    /// Checks the parameters; errors name the field under `spec.`.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_selector(&self.selector, "spec.selector")?;
        if let Some(sharing) = self.sharing {
            sharing.validate("spec.sharing")?;
        }
        Ok(())
    }
}

/// A claim's request with its class applied: what the fitting logic works on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveRequest {
    /// How many devices (1..=16).
    pub count: u8,
    /// The class selector followed by the claim selector.
    pub selector: Vec<Requirement>,
    /// Resolved sharing.
    pub sharing: Sharing,
    /// The class placement policy.
    pub policy: Policy,
    /// When set, all devices carry the same value of this attribute.
    pub same_attribute: Option<String>,
}

impl EffectiveRequest {
    /// Validates `class` and `claim` and combines them: selectors concatenated (class first),
    /// sharing from the claim, else the class, else exclusive.
    pub fn combine(class: &ClassDefaults, claim: &ClaimRequest) -> Result<Self, ValidationError> {
        class.validate()?;
        claim.validate()?;
        Ok(EffectiveRequest {
            count: claim.count,
            selector: class
                .selector
                .iter()
                .chain(&claim.selector)
                .cloned()
                .collect(),
            sharing: claim.sharing.or(class.sharing).unwrap_or_default(),
            policy: class.policy,
            same_attribute: claim.same_attribute.clone(),
        })
    }

    /// The request of a claim without parameters: one exclusive device matching the class.
    pub fn from_class(class: &ClassDefaults) -> Result<Self, ValidationError> {
        class.validate()?;
        Ok(EffectiveRequest {
            count: 1,
            selector: class.selector.clone(),
            sharing: Sharing::Exclusive,
            policy: class.policy,
            same_attribute: None,
        })
    }

    /// The selector as text for messages (`model In [H200], memory Gt 40Gi`).
    pub fn selector_text(&self) -> String {
        self.selector
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}
