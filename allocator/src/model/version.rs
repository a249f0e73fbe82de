//! Semantic versions (`1.2.3-rc.1+build.5`) with semver precedence: a thin wrapper over the
//! `semver` crate's grammar and precedence that ignores build metadata in equality and hashing
//! too. Depends on nothing but `semver` and serde.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ParseError;

/// A semantic version `major.minor.patch[-prerelease][+build]`.
///
/// Ordering, equality and hashing follow semver precedence: build metadata is ignored and a
/// pre-release sorts before its release (`1.0.0-rc.1 < 1.0.0`). (`semver::Version` alone orders
/// by build metadata as well, so `1.2.3+a` and `1.2.3` would differ.)
#[derive(Clone, Debug)]
pub struct Version(semver::Version);

impl Version {
    /// Parses strict semver text: no leading `v`, no leading zeros in numeric parts, no
    /// surrounding whitespace. Numeric pre-release identifiers must fit in 64 bits like
    /// major, minor and patch (`semver` alone takes any length).
    ///
    /// ```
    /// use dra_allocator::model::Version;
    ///
    /// let driver = Version::parse("550.54.15").unwrap();
    /// assert!(Version::parse("550.54.15-rc.1").unwrap() < driver);
    /// assert_eq!(Version::parse("550.54.15+build.7").unwrap(), driver);
    /// assert!(Version::parse("v550.54.15").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let failed = |reason: String| ParseError::Version {
            input: text.to_owned(),
            reason,
        };
        let version = semver::Version::parse(text).map_err(|e| failed(e.to_string()))?;
        let numeric_out_of_range = version
            .pre
            .as_str()
            .split('.')
            .filter(|id| id.bytes().all(|b| b.is_ascii_digit()))
            .any(|id| !id.is_empty() && id.parse::<u64>().is_err());
        if numeric_out_of_range {
            return Err(failed(
                "value of pre-release identifier exceeds u64::MAX".to_owned(),
            ));
        }
        Ok(Version(version))
    }

    /// A release version without pre-release or build parts.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        Version(semver::Version::new(major, minor, patch))
    }

    /// The `(major, minor, patch)` triple.
    pub fn triple(&self) -> (u64, u64, u64) {
        (self.0.major, self.0.minor, self.0.patch)
    }

    /// Whether the version carries a pre-release part.
    pub fn is_prerelease(&self) -> bool {
        !self.0.pre.is_empty()
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
        (self.0.major, self.0.minor, self.0.patch, &self.0.pre).hash(state);
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp_precedence(&other.0)
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
        write!(f, "{}", self.0)
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
