//! Selector requirements (`{attribute, operator, values}`): validation and matching against a
//! device's attributes. Pure; depends only on the rest of the model.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{AttributeValue, Attributes, ParseError, Quantity, ValidationError, Version};

/// How a requirement compares an attribute with its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operator {
    /// The attribute equals one of the values (a slice: one of its elements does).
    In,
    /// The attribute is missing or equals none of the values.
    NotIn,
    /// The attribute is present.
    Exists,
    /// The attribute is missing.
    DoesNotExist,
    /// The attribute is greater than the single value (numbers, quantities, versions).
    Gt,
    /// The attribute is less than the single value (numbers, quantities, versions).
    Lt,
}

impl Operator {
    /// The operator's name as written in parameters.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Operator {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "In" => Ok(Operator::In),
            "NotIn" => Ok(Operator::NotIn),
            "Exists" => Ok(Operator::Exists),
            "DoesNotExist" => Ok(Operator::DoesNotExist),
            "Gt" => Ok(Operator::Gt),
            "Lt" => Ok(Operator::Lt),
            _ => Err(ParseError::Operator {
                input: s.to_owned(),
            }),
        }
    }
}

/// One selector requirement: `attribute operator values`, e.g. `model In [H200]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Requirement {
    /// The attribute name the requirement looks at.
    pub attribute: String,
    /// How the attribute is compared.
    pub operator: Operator,
    /// The values compared against; their meaning depends on the attribute's kind.
    #[serde(default)]
    pub values: Vec<String>,
}

impl Requirement {
    /// A requirement from its parts.
    pub fn new(attribute: impl Into<String>, operator: Operator, values: &[&str]) -> Self {
        Requirement {
            attribute: attribute.into(),
            operator,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    /// Checks the requirement's shape; errors name the field under `path` (e.g.
    /// `spec.selector[2]` gives `spec.selector[2].values`).
    pub fn validate(&self, path: &str) -> Result<(), ValidationError> {
        if self.attribute.trim().is_empty() {
            return Err(ValidationError::new(
                format!("{path}.attribute"),
                "must not be empty",
            ));
        }
        let field = format!("{path}.values");
        let n = self.values.len();
        match self.operator {
            Operator::In | Operator::NotIn if n == 0 => Err(ValidationError::new(
                field,
                format!("operator {} needs at least one value", self.operator),
            )),
            Operator::Exists | Operator::DoesNotExist if n != 0 => Err(ValidationError::new(
                field,
                format!("operator {} takes no values, got {n}", self.operator),
            )),
            Operator::Gt | Operator::Lt if n != 1 => Err(ValidationError::new(
                field,
                format!(
                    "operator {} needs exactly one value, got {n}",
                    self.operator
                ),
            )),
            Operator::Gt | Operator::Lt => {
                let value = &self.values[0];
                if Quantity::parse(value).is_err() && Version::parse(value).is_err() {
                    return Err(ValidationError::new(
                        format!("{field}[0]"),
                        format!("{value:?} is not a number, quantity or version"),
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Whether a device with `attributes` meets this requirement. Values that do not parse as
    /// the attribute's kind never match; a missing attribute matches only `NotIn` and
    /// `DoesNotExist`.
    pub fn matches(&self, attributes: &Attributes) -> bool {
        CompiledRequirement::new(self).matches(attributes)
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.attribute, self.operator)?;
        match self.operator {
            Operator::Exists | Operator::DoesNotExist => Ok(()),
            Operator::Gt | Operator::Lt if self.values.len() == 1 => {
                write!(f, " {}", self.values[0])
            }
            _ => write!(f, " [{}]", self.values.join(", ")),
        }
    }
}

/// One requirement value parsed once in every kind it could be compared as.
#[derive(Clone, Debug)]
struct ParsedValue {
    text: String,
    boolean: Option<bool>,
    quantity: Option<Quantity>,
    version: Option<Version>,
}

impl ParsedValue {
    fn new(text: &str) -> Self {
        ParsedValue {
            text: text.to_owned(),
            boolean: match text {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            quantity: Quantity::parse(text).ok(),
            // Strict semver starts with a digit; skipping other text spares building the error
            // of a parse that must fail (most values are names such as `H200`).
            version: text
                .starts_with(|c: char| c.is_ascii_digit())
                .then(|| Version::parse(text).ok())
                .flatten(),
        }
    }

    /// Whether this value equals `attribute` compared as the attribute's kind.
    fn equals(&self, attribute: &AttributeValue) -> bool {
        match attribute {
            AttributeValue::Bool(b) => self.boolean == Some(*b),
            AttributeValue::Int(i) => self.quantity == Some(Quantity::from_units(*i)),
            AttributeValue::Quantity(q) => self.quantity.as_ref() == Some(q),
            AttributeValue::String(s) => self.text == *s,
            AttributeValue::Version(v) => self.version.as_ref() == Some(v),
            AttributeValue::IntSlice(items) => items
                .iter()
                .any(|i| self.quantity == Some(Quantity::from_units(*i))),
            AttributeValue::StringSlice(items) => items.contains(&self.text),
        }
    }

    /// `attribute` compared with this value, for the ordered kinds only.
    fn compare(&self, attribute: &AttributeValue) -> Option<Ordering> {
        match attribute {
            AttributeValue::Int(i) => Some(Quantity::from_units(*i).cmp(self.quantity.as_ref()?)),
            AttributeValue::Quantity(q) => Some(q.cmp(self.quantity.as_ref()?)),
            AttributeValue::Version(v) => Some(v.cmp(self.version.as_ref()?)),
            _ => None,
        }
    }
}

/// A requirement with its values parsed up front, for matching many devices.
#[derive(Clone, Debug)]
pub struct CompiledRequirement {
    attribute: String,
    operator: Operator,
    values: Vec<ParsedValue>,
}

impl CompiledRequirement {
    /// Parses the values of `requirement` once.
    pub fn new(requirement: &Requirement) -> Self {
        CompiledRequirement {
            attribute: requirement.attribute.clone(),
            operator: requirement.operator,
            values: requirement
                .values
                .iter()
                .map(|v| ParsedValue::new(v))
                .collect(),
        }
    }

    /// Whether a device with `attributes` meets the requirement (see [`Requirement::matches`]).
    pub fn matches(&self, attributes: &Attributes) -> bool {
        self.matches_value(attributes.get(&self.attribute))
    }

    /// The attribute name the requirement looks at.
    pub fn attribute(&self) -> &str {
        &self.attribute
    }

    /// Whether a device whose value of [`Self::attribute`] is `value` (`None`: the device lacks
    /// it) meets the requirement. The answer depends on nothing else, so callers may memoise it
    /// per distinct value.
    pub fn matches_value(&self, value: Option<&AttributeValue>) -> bool {
        let Some(value) = value else {
            return matches!(self.operator, Operator::NotIn | Operator::DoesNotExist);
        };
        match self.operator {
            Operator::Exists => true,
            Operator::DoesNotExist => false,
            Operator::In => self.values.iter().any(|v| v.equals(value)),
            Operator::NotIn => !self.values.iter().any(|v| v.equals(value)),
            Operator::Gt => self.ordered(value, Ordering::Greater),
            Operator::Lt => self.ordered(value, Ordering::Less),
        }
    }

    fn ordered(&self, value: &AttributeValue, wanted: Ordering) -> bool {
        match self.values.as_slice() {
            [single] => single.compare(value) == Some(wanted),
            _ => false,
        }
    }
}
