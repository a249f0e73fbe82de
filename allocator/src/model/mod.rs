//! The device model: attribute values, devices, selector requirements, sharing, policy and the
//! parameters of a claim and its class, with their validation.
//!
//! Plain data with serde derives. Must not depend on the ledger, on I/O, redb, tokio or kube;
//! every function here is pure and deterministic.

mod attributes;
mod quantity;
mod request;
mod requirement;
mod version;

#[cfg(test)]
mod tests;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use attributes::Attributes;
pub use quantity::Quantity;
pub use request::{ClaimRequest, ClassDefaults, EffectiveRequest, Policy, Sharing, MAX_COUNT};
pub use requirement::{CompiledRequirement, Operator, Requirement};
pub use version::Version;

/// Text that does not parse as the value it should be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A Kubernetes quantity (`80Gi`, `500m`).
    #[error("invalid quantity {input:?}: {reason}")]
    Quantity {
        /// The rejected text.
        input: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A semantic version (`1.2.3-rc.1`).
    #[error("invalid version {input:?}: {reason}")]
    Version {
        /// The rejected text.
        input: String,
        /// Why it was rejected, in the words of the `semver` crate.
        reason: String,
    },
    /// A selector operator name.
    #[error("unknown operator {input:?}: expected In, NotIn, Exists, DoesNotExist, Gt or Lt")]
    Operator {
        /// The rejected text.
        input: String,
    },
}

/// Invalid parameters: the field that is wrong and why, e.g.
/// `spec.count: must be between 1 and 16, got 0`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ValidationError {
    /// Path of the offending field, e.g. `spec.selector[2].values`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ValidationError {
    /// An error for `field` with `reason`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ValidationError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// The value of one device attribute, one of the `ResourceSlice` (Kubernetes 1.30) kinds.
///
/// Serialized externally tagged in camelCase (`{"int": 4}`, `{"stringSlice": ["a"]}`), the shape of
/// a `namedResources` attribute.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AttributeValue {
    /// `true` or `false`.
    Bool(bool),
    /// A 64-bit integer.
    Int(i64),
    /// A Kubernetes quantity such as `80Gi`.
    Quantity(Quantity),
    /// Free text.
    String(String),
    /// A semantic version.
    Version(Version),
    /// A list of integers.
    IntSlice(Vec<i64>),
    /// A list of strings.
    StringSlice(Vec<String>),
}

impl fmt::Display for AttributeValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
            f.write_str("[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{item}")?;
            }
            f.write_str("]")
        }
        match self {
            AttributeValue::Bool(b) => write!(f, "{b}"),
            AttributeValue::Int(i) => write!(f, "{i}"),
            AttributeValue::Quantity(q) => write!(f, "{q}"),
            AttributeValue::String(s) => f.write_str(s),
            AttributeValue::Version(v) => write!(f, "{v}"),
            AttributeValue::IntSlice(items) => list(f, items),
            AttributeValue::StringSlice(items) => list(f, items),
        }
    }
}

/// One device as published in a `ResourceSlice`: its name on the node and its attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Device {
    /// The device name, unique on its node (`gpu-0`).
    pub name: String,
    /// What selectors match against.
    pub attributes: Attributes,
}

impl Device {
    /// A device without attributes.
    pub fn new(name: impl Into<String>) -> Self {
        Device {
            name: name.into(),
            attributes: Attributes::new(),
        }
    }

    /// Adds (or replaces) an attribute; for building devices in tests and fixtures.
    #[must_use]
    pub fn with(mut self, attribute: impl Into<String>, value: AttributeValue) -> Self {
        self.attributes.insert(attribute.into(), value);
        self
    }

    /// Whether the device meets every requirement of `selector`.
    pub fn matches(&self, selector: &[Requirement]) -> bool {
        selector.iter().all(|r| r.matches(&self.attributes))
    }
}
