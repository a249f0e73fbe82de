//! Semantic versions (`1.2.3-rc.1+build.5`) with semver precedence. Owns only parsing and
//! ordering; depends on nothing but serde.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ParseError;

/// One dot-separated pre-release identifier.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Identifier {
    /// Digits only; compares numerically and before any alphanumeric identifier.
    Numeric(u64),
    /// Letters, digits and hyphens; compares in ASCII order.
    Alphanumeric(String),
}

impl fmt::Display for Identifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identifier::Numeric(n) => write!(f, "{n}"),
            Identifier::Alphanumeric(s) => f.write_str(s),
        }
    }
}

/// A semantic version `major.minor.patch[-prerelease][+build]`.
///
/// Ordering, equality and hashing follow semver precedence: build metadata is ignored and a
/// pre-release sorts before its release (`1.0.0-rc.1 < 1.0.0`).
#[derive(Clone, Debug)]
pub struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Identifier>,
    build: String,
}

impl Version {
    /// Parses strict semver text (no leading `v`, no leading zeros in numeric parts).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        parse(text).map_err(|reason| ParseError::Version {
            input: text.to_owned(),
            reason,
        })
    }

    /// A release version without pre-release or build parts.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        Version {
            major,
            minor,
            patch,
            pre: Vec::new(),
            build: String::new(),
        }
    }

    /// The `(major, minor, patch)` triple.
    pub fn triple(&self) -> (u64, u64, u64) {
        (self.major, self.minor, self.patch)
    }

    /// Whether the version carries a pre-release part.
    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl Hash for Version {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.major, self.minor, self.patch, &self.pre).hash(state);
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.triple().cmp(&other.triple()).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                // Lexicographic by identifier; a shorter list of equal prefix sorts first.
                (false, false) => self.pre.cmp(&other.pre),
            }
        })
    }
}

impl FromStr for Version {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, id) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            write!(f, "{id}")?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Version::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn numeric(part: &str) -> Result<u64, &'static str> {
    if part.is_empty() {
        return Err("empty numeric part");
    }
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err("numeric part has a non-digit");
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err("numeric part has a leading zero");
    }
    part.parse().map_err(|_| "numeric part out of range")
}

fn valid_identifier_chars(part: &str) -> bool {
    !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn parse(text: &str) -> Result<Version, &'static str> {
    let (rest, build) = match text.split_once('+') {
        Some((rest, build)) => {
            if !build.split('.').all(valid_identifier_chars) {
                return Err("invalid build metadata");
            }
            (rest, build)
        }
        None => (text, ""),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let mut parts = core.split('.');
    let (Some(major), Some(minor), Some(patch), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("expected major.minor.patch");
    };
    let mut version = Version::new(numeric(major)?, numeric(minor)?, numeric(patch)?);
    if let Some(pre) = pre {
        for part in pre.split('.') {
            if !valid_identifier_chars(part) {
                return Err("invalid pre-release identifier");
            }
            let id = if part.bytes().all(|b| b.is_ascii_digit()) {
                Identifier::Numeric(numeric(part)?)
            } else {
                Identifier::Alphanumeric(part.to_owned())
            };
            version.pre.push(id);
        }
    }
    build.clone_into(&mut version.build);
    Ok(version)
}
