//! Semantic versions in CEL, as the apiserver's semver library (version 1, Kubernetes 1.33+)
//! has them: `semver(string)`, `semver(string, normalize)`, `isSemver(string)`,
//! `isSemver(string, normalize)` and the `Semver` methods `major`, `minor`, `patch`,
//! `compareTo`, `isGreaterThan` and `isLessThan`; `==` compares by precedence, which ignores
//! build metadata. `version` attributes of a device are `Semver` values.
//!
//! Parsing is strict semver 2.0.0 (the `semver` crate); `normalize` first accepts a leading `v`,
//! missing minor and patch numbers and leading zeros, as the library does. Pure: no I/O.

use std::any::Any;
use std::cmp::Ordering;

use cel::common::types::{CelBool, CelInt, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::error::SemverError;

/// The CEL type of a semantic version.
static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

/// A semantic version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Semver(semver::Version);

impl Semver {
    /// Parses a strict semver 2.0.0 version.
    pub fn parse(text: &str) -> Result<Self, SemverError> {
        semver::Version::parse(text)
            .map(Self)
            .map_err(|source| SemverError::Strict {
                text: text.to_owned(),
                source,
            })
    }

    /// Parses `text` after normalizing it: an optional leading `v`, missing minor and patch
    /// numbers taken as 0, leading zeros dropped.
    pub fn parse_normalized(text: &str) -> Result<Self, SemverError> {
        let trimmed = text.strip_prefix('v').unwrap_or(text);
        let core_end = trimmed.find(['-', '+']).unwrap_or(trimmed.len());
        let (core, rest) = trimmed.split_at(core_end);
        let mut parts: Vec<String> = core
            .split('.')
            .map(|part| {
                let stripped = part.trim_start_matches('0');
                if stripped.is_empty() && !part.is_empty() {
                    "0".to_owned()
                } else {
                    stripped.to_owned()
                }
            })
            .collect();
        if parts.len() > 3 {
            return Self::parse(text);
        }
        parts.resize(3, "0".to_owned());
        Self::parse(&format!("{}{rest}", parts.join("."))).map_err(|source| {
            SemverError::Normalized {
                text: text.to_owned(),
                source: Box::new(source),
            }
        })
    }

    /// Precedence order: major, minor, patch, then pre-release; build metadata is ignored.
    fn precedence(&self, other: &Self) -> Ordering {
        let (a, b) = (&self.0, &other.0);
        (a.major, a.minor, a.patch, &a.pre).cmp(&(b.major, b.minor, b.patch, &b.pre))
    }
}

impl Val for Semver {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }
    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<Semver>()
            .is_some_and(|other| self.precedence(other) == Ordering::Equal)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Semver {}

fn semver(text: &CelString<'_>) -> Result<Semver, ExecutionError> {
    Semver::parse(text.inner()).map_err(|error| ExecutionError::function_error("semver", error))
}

#[allow(clippy::trivially_copy_pass_by_ref)] // the overload macros hand arguments by reference
fn semver_normalize(text: &CelString<'_>, normalize: &CelBool) -> Result<Semver, ExecutionError> {
    let parsed = if *normalize.inner() {
        Semver::parse_normalized(text.inner())
    } else {
        Semver::parse(text.inner())
    };
    parsed.map_err(|error| ExecutionError::function_error("semver", error))
}

fn is_semver(text: &CelString<'_>) -> CelBool {
    Semver::parse(text.inner()).is_ok().into()
}

#[allow(clippy::trivially_copy_pass_by_ref)] // the overload macros hand arguments by reference
fn is_semver_normalize(text: &CelString<'_>, normalize: &CelBool) -> CelBool {
    if *normalize.inner() {
        Semver::parse_normalized(text.inner()).is_ok().into()
    } else {
        is_semver(text)
    }
}

fn number(value: u64) -> Result<CelInt, ExecutionError> {
    i64::try_from(value)
        .map(CelInt::from)
        .map_err(|_| ExecutionError::function_error("semver", "version number out of range"))
}

fn major(this: &Semver) -> Result<CelInt, ExecutionError> {
    number(this.0.major)
}

fn minor(this: &Semver) -> Result<CelInt, ExecutionError> {
    number(this.0.minor)
}

fn patch(this: &Semver) -> Result<CelInt, ExecutionError> {
    number(this.0.patch)
}

fn compare_to(this: &Semver, other: &Semver) -> CelInt {
    match this.precedence(other) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
    .into()
}

fn is_greater_than(this: &Semver, other: &Semver) -> CelBool {
    (this.precedence(other) == Ordering::Greater).into()
}

fn is_less_than(this: &Semver, other: &Semver) -> CelBool {
    (this.precedence(other) == Ordering::Less).into()
}

/// Registers the semver functions and methods on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(SEMVER_TYPE.to_owned())?;
    cel::add_overload!(env, fn semver: (CelString) -> Result<Semver>)?;
    cel::add_overload!(env, fn semver_normalize: (CelString, CelBool) -> Result<Semver>,
        name = "semver")?;
    cel::add_overload!(env, fn is_semver: (CelString) -> CelBool)?;
    cel::add_overload!(env, fn is_semver_normalize: (CelString, CelBool) -> CelBool,
        name = "isSemver")?;
    cel::add_member_overload!(env, fn major: (Semver) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn minor: (Semver) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn patch: (Semver) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn compare_to: (Semver, Semver) -> CelInt,
        id = "semver.compareTo(semver)")?;
    cel::add_member_overload!(env, fn is_greater_than: (Semver, Semver) -> CelBool,
        id = "semver.isGreaterThan(semver)")?;
    cel::add_member_overload!(env, fn is_less_than: (Semver, Semver) -> CelBool,
        id = "semver.isLessThan(semver)")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_parsing_refuses_what_normalizing_accepts() {
        assert!(Semver::parse("1.2.3").is_ok());
        assert!(Semver::parse("1.2.3-rc.1+build.5").is_ok());
        for loose in ["v1.2.3", "1.2", "1", "01.2.3"] {
            assert!(Semver::parse(loose).is_err(), "{loose}");
            let normalized = Semver::parse_normalized(loose).unwrap();
            assert_eq!(normalized.0.major, 1, "{loose}");
        }
        assert_eq!(
            Semver::parse_normalized("v1.2").unwrap().0.to_string(),
            "1.2.0"
        );
        assert!(Semver::parse_normalized("1.2.3.4").is_err());
        assert!(Semver::parse_normalized("one").is_err());
    }

    #[test]
    fn precedence_ignores_build_metadata_and_orders_pre_releases_first() {
        let v = |s: &str| Semver::parse(s).unwrap();
        assert_eq!(v("1.0.0+a").precedence(&v("1.0.0+b")), Ordering::Equal);
        assert_eq!(v("1.0.0-rc.1").precedence(&v("1.0.0")), Ordering::Less);
        assert_eq!(v("1.10.0").precedence(&v("1.9.0")), Ordering::Greater);
    }
}
