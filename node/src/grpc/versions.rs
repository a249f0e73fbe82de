//! How Kubernetes kubelets read a DRA plugin's `supported_versions`, so that the agent's own
//! tests check its registration by those rules (the simulated kubelet has its own copy,
//! `dev/sim/src/actors/plugins/validation.rs`, written separately so that it checks the agent rather
//! than agreeing with it by construction).
//!
//! A 1.30 kubelet ([`highest_supported_version`]): every entry is parsed as a
//! generic version (an optional `v`, then at least two dot-separated numbers; whatever follows
//! the numbers is ignored), entries that do not parse or have a major version above 1 are
//! skipped, and the highest remaining one must have major version 1. So `1.0.0` is accepted,
//! while service names such as `v1.DRAPlugin` or `v1alpha3` are not versions at all.
//!
//! A 1.34 kubelet ([`service_chosen_by_134_kubelet`]): the entries are gRPC service names
//! (`<package>.<service>`); the kubelet knows `v1.DRAPlugin` and `v1beta1.DRAPlugin` and takes
//! the first entry of the plugin's list that it knows, in the plugin's order; other entries are
//! passed over. None known is a refusal.

use std::cmp::Ordering;
use std::fmt;

/// Why an entry or a whole list was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The entry does not start with a number (after blanks and an optional `v`).
    #[error("could not parse {input:?} as version")]
    Unparsable {
        /// The entry.
        input: String,
    },
    /// Fewer than two numeric components.
    #[error("illegal version string {input:?}")]
    TooFewComponents {
        /// The entry.
        input: String,
    },
    /// The major component has a leading zero.
    #[error("illegal zero-prefixed version component {component:?} in {input:?}")]
    ZeroPrefixed {
        /// The component.
        component: String,
        /// The entry.
        input: String,
    },
    /// A component does not fit in 64 bits.
    #[error("illegal non-numeric version component {component:?} in {input:?}")]
    OutOfRange {
        /// The component.
        component: String,
        /// The entry.
        input: String,
    },
    /// The plugin sent no entry.
    #[error("empty array for supported versions")]
    Empty,
    /// No entry is a version with major version at most 1.
    #[error(
        "could not find a highest supported version from versions {versions:?} reported: {last}"
    )]
    NoneSupported {
        /// The entries.
        versions: Vec<String>,
        /// The error of the last entry that did not parse, or `none` when all parsed.
        last: String,
    },
    /// The highest version is not a 1.x.
    #[error("highest supported version reported is {version}, must be v1.x")]
    NotV1 {
        /// The highest version.
        version: GenericVersion,
    },
}

/// A version of two or more numeric components, compared component by component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenericVersion(Vec<u64>);

impl GenericVersion {
    /// The first component.
    pub fn major(&self) -> u64 {
        self.0.first().copied().unwrap_or(0)
    }

    /// The numeric components.
    pub fn components(&self) -> &[u64] {
        &self.0
    }
}

impl Ord for GenericVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.0.len().max(other.0.len());
        (0..len)
            .map(|i| {
                let a = self.0.get(i).copied().unwrap_or(0);
                let b = other.0.get(i).copied().unwrap_or(0);
                a.cmp(&b)
            })
            .find(|order| order.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for GenericVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for GenericVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, component) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{component}")?;
        }
        Ok(())
    }
}

/// Parses `input` the way the kubelet's generic version parser does.
pub fn parse_generic(input: &str) -> Result<GenericVersion, VersionError> {
    let rest = input.trim_start_matches([' ', '\t', '\n', '\r', '\x0c']);
    let rest = rest.strip_prefix('v').unwrap_or(rest);
    let mut numbers = Vec::new();
    let mut chars = rest;
    loop {
        let digits = chars.len() - chars.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            break;
        }
        numbers.push(&chars[..digits]);
        chars = &chars[digits..];
        // a dot continues the version only when a digit follows it
        match chars.strip_prefix('.') {
            Some(after) if after.starts_with(|c: char| c.is_ascii_digit()) => chars = after,
            _ => break,
        }
    }
    if numbers.is_empty() {
        return Err(VersionError::Unparsable {
            input: input.to_owned(),
        });
    }
    if numbers.len() < 2 {
        return Err(VersionError::TooFewComponents {
            input: input.to_owned(),
        });
    }
    if numbers[0].len() > 1 && numbers[0].starts_with('0') {
        return Err(VersionError::ZeroPrefixed {
            component: numbers[0].to_owned(),
            input: input.to_owned(),
        });
    }
    numbers
        .iter()
        .map(|component| {
            component.parse().map_err(|_| VersionError::OutOfRange {
                component: (*component).to_owned(),
                input: input.to_owned(),
            })
        })
        .collect::<Result<_, _>>()
        .map(GenericVersion)
}

/// The highest version of `versions` a 1.30 kubelet would pick, or why it refuses them all.
pub fn highest_supported_version<S: AsRef<str>>(
    versions: &[S],
) -> Result<GenericVersion, VersionError> {
    if versions.is_empty() {
        return Err(VersionError::Empty);
    }
    let mut highest: Option<GenericVersion> = None;
    let mut last_error = None;
    for entry in versions.iter().rev() {
        match parse_generic(entry.as_ref()) {
            Err(error) => last_error = Some(error),
            Ok(version) if version.major() > 1 => {}
            Ok(version) => {
                if highest.as_ref().is_none_or(|h| *h < version) {
                    highest = Some(version);
                }
            }
        }
    }
    match highest {
        None => Err(VersionError::NoneSupported {
            versions: versions.iter().map(|v| v.as_ref().to_owned()).collect(),
            last: last_error.map_or_else(|| "none".to_owned(), |e| e.to_string()),
        }),
        Some(version) if version.major() != 1 => Err(VersionError::NotV1 { version }),
        Some(version) => Ok(version),
    }
}

/// The gRPC services a 1.34 kubelet calls prepare and unprepare on, newest first.
pub const SERVICES_OF_134_KUBELET: [&str; 2] = ["v1.DRAPlugin", "v1beta1.DRAPlugin"];

/// Why a 1.34 kubelet refuses a plugin's list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The plugin sent no entry.
    #[error("empty list of supported gRPC services (aka supported versions)")]
    Empty,
    /// No entry is a service the kubelet knows.
    #[error("none of services supported by the plugin ({offered:?}) are supported by the kubelet ({known:?})")]
    NoneKnown {
        /// The entries.
        offered: Vec<String>,
        /// [`SERVICES_OF_134_KUBELET`].
        known: Vec<String>,
    },
}

/// The service a 1.34 kubelet uses for a plugin advertising `versions`: the first entry it
/// knows.
pub fn service_chosen_by_134_kubelet<S: AsRef<str>>(
    versions: &[S],
) -> Result<&'static str, ServiceError> {
    if versions.is_empty() {
        return Err(ServiceError::Empty);
    }
    versions
        .iter()
        .find_map(|v| {
            SERVICES_OF_134_KUBELET
                .iter()
                .find(|known| **known == v.as_ref())
                .copied()
        })
        .ok_or_else(|| ServiceError::NoneKnown {
            offered: versions.iter().map(|v| v.as_ref().to_owned()).collect(),
            known: SERVICES_OF_134_KUBELET.map(str::to_owned).to_vec(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_134_kubelet_takes_the_first_service_it_knows_in_the_plugins_order() {
        assert_eq!(
            service_chosen_by_134_kubelet(&["1.0.0", "v1.DRAPlugin", "v1beta1.DRAPlugin"]),
            Ok("v1.DRAPlugin")
        );
        assert_eq!(
            service_chosen_by_134_kubelet(&["v1beta1.DRAPlugin", "v1.DRAPlugin"]),
            Ok("v1beta1.DRAPlugin")
        );
        assert_eq!(
            service_chosen_by_134_kubelet(&["v1alpha1.DRAResourceHealth", "v1beta1.DRAPlugin"]),
            Ok("v1beta1.DRAPlugin")
        );
        assert!(matches!(
            service_chosen_by_134_kubelet(&["1.0.0"]),
            Err(ServiceError::NoneKnown { .. })
        ));
        assert_eq!(
            service_chosen_by_134_kubelet::<&str>(&[]),
            Err(ServiceError::Empty)
        );
    }

    #[test]
    fn generic_versions_need_two_numeric_components() {
        assert_eq!(parse_generic("1.0.0").unwrap().components(), [1, 0, 0]);
        assert_eq!(parse_generic(" v1.2").unwrap().components(), [1, 2]);
        assert_eq!(parse_generic("1.2-alpha+x").unwrap().components(), [1, 2]);
        assert_eq!(parse_generic("1.02").unwrap().components(), [1, 2]);
        assert!(matches!(
            parse_generic("v1.DRAPlugin"),
            Err(VersionError::TooFewComponents { .. })
        ));
        assert!(matches!(
            parse_generic("v1alpha3"),
            Err(VersionError::TooFewComponents { .. })
        ));
        assert!(matches!(
            parse_generic("DRAPlugin"),
            Err(VersionError::Unparsable { .. })
        ));
        assert!(matches!(
            parse_generic("01.0"),
            Err(VersionError::ZeroPrefixed { .. })
        ));
        assert!(matches!(
            parse_generic("1.99999999999999999999"),
            Err(VersionError::OutOfRange { .. })
        ));
    }

    #[test]
    fn a_130_kubelet_accepts_one_dot_zero_dot_zero_and_skips_service_names() {
        assert_eq!(
            highest_supported_version(&["1.0.0"]).unwrap().to_string(),
            "1.0.0"
        );
        let mixed = ["v1.DRAPlugin", "v1beta1.DRAPlugin", "1.0.0"];
        assert_eq!(
            highest_supported_version(&mixed).unwrap().to_string(),
            "1.0.0"
        );
        assert!(matches!(
            highest_supported_version(&["v1.DRAPlugin"]),
            Err(VersionError::NoneSupported { .. })
        ));
        assert_eq!(
            highest_supported_version::<&str>(&[]),
            Err(VersionError::Empty)
        );
    }

    #[test]
    fn majors_above_one_are_skipped_and_a_zero_major_is_refused() {
        assert_eq!(
            highest_supported_version(&["2.0", "1.3", "1.10"])
                .unwrap()
                .to_string(),
            "1.10"
        );
        assert!(matches!(
            highest_supported_version(&["2.0"]),
            Err(VersionError::NoneSupported { .. })
        ));
        assert!(matches!(
            highest_supported_version(&["0.9"]),
            Err(VersionError::NotV1 { .. })
        ));
    }
}
