//! The Kubernetes release the simulated cluster behaves as: 1.30 (`v1alpha2` DRA,
//! `resource.k8s.io/v1alpha2`, the default) or 1.34 to 1.37 (`resource.k8s.io/v1`).
//!
//! One value is chosen per cluster and given to the API server (which resources it serves, in
//! which shape) and to the actors (which controllers run, how the kubelet talks to plugins).
//! What differs between releases is not decided here but looked up in the release table of
//! [`crate::release`]: a release is one row there.

use std::fmt;
use std::str::FromStr;

use crate::release::{Generation, ReleaseFacts};

/// A Kubernetes release the simulator can play.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum KubernetesVersion {
    /// 1.30: `resource.k8s.io/v1alpha2` (`v1alpha2` with `PodSchedulingContexts`), pods'
    /// `spec.resourceClaims[].source`, kubelet plugin API `v1alpha3`.
    #[default]
    V1_30,
    /// 1.34: `resource.k8s.io/v1` (`v1`: `DeviceClasses`, allocation by the scheduler),
    /// pods' `spec.resourceClaims[].resourceClaimName`, kubelet plugin API `v1.DRAPlugin`.
    V1_34,
    /// 1.35: the `v1` generation with the feature level of 1.34 (`DeviceTaintRule` gets a status).
    V1_35,
    /// 1.36: the `v1` generation; device taints, partitionable devices, consumable capacity,
    /// binding conditions and extended resources are beta and on.
    V1_36,
    /// 1.37: the `v1` generation; device taints, `DeviceTaintRule` (served in `v1`) and
    /// extended resources are GA.
    V1_37,
}

impl KubernetesVersion {
    /// Every version, oldest first.
    pub const ALL: [KubernetesVersion; 5] = [
        KubernetesVersion::V1_30,
        KubernetesVersion::V1_34,
        KubernetesVersion::V1_35,
        KubernetesVersion::V1_36,
        KubernetesVersion::V1_37,
    ];

    /// The releases of the `v1` generation, oldest first.
    pub fn v1_releases() -> impl Iterator<Item = KubernetesVersion> {
        Self::ALL.into_iter().filter(|v| v.serves_v1())
    }

    /// This release's row of the release table.
    pub fn facts(self) -> &'static ReleaseFacts {
        ReleaseFacts::of(self)
    }

    /// `1.30`, `1.34`, ...
    pub fn as_str(self) -> &'static str {
        self.facts().name
    }

    /// The minor version: 30, 34, ...
    pub fn minor(self) -> u32 {
        self.facts().minor
    }

    /// The `gitVersion` the server reports at `/version`.
    pub fn git_version(self) -> &'static str {
        self.facts().git_version
    }

    /// Whether this release serves `resource.k8s.io/v1` instead of `resource.k8s.io/v1alpha2`
    /// (the `v1` generation: scheduler allocation, the 1.34+ pod shape and kubelet plugin API).
    pub fn serves_v1(self) -> bool {
        self.facts().generation == Generation::V1
    }

    /// The releases the simulator plays, as a flag's value list: `1.30|1.34|...`.
    pub fn choices() -> String {
        Self::ALL.map(Self::as_str).join("|")
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version string that names no release the simulator plays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported Kubernetes version {0:?}: the simulator plays {choices}", choices = KubernetesVersion::ALL.map(KubernetesVersion::as_str).join(", "))]
pub struct UnsupportedVersion(pub String);

impl FromStr for KubernetesVersion {
    type Err = UnsupportedVersion;

    /// Accepts `1.30`, `v1.30`, `1.30.x` and the same for the other releases.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim().trim_start_matches('v');
        let mut parts = trimmed.split('.');
        let (major, minor) = (parts.next(), parts.next());
        let patch_ok =
            parts.next().is_none_or(|p| p.parse::<u32>().is_ok()) && parts.next().is_none();
        KubernetesVersion::ALL
            .into_iter()
            .find(|v| major == Some("1") && minor == Some(&v.minor().to_string()) && patch_ok)
            .ok_or_else(|| UnsupportedVersion(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_release_with_or_without_v_and_patch() {
        for text in ["1.30", "v1.30", "1.30.14"] {
            assert_eq!(text.parse(), Ok(KubernetesVersion::V1_30), "{text}");
        }
        for text in ["1.34", "v1.34.0"] {
            assert_eq!(text.parse(), Ok(KubernetesVersion::V1_34), "{text}");
        }
        for (text, version) in [
            ("1.35", KubernetesVersion::V1_35),
            ("v1.36.2", KubernetesVersion::V1_36),
            ("1.37.0", KubernetesVersion::V1_37),
        ] {
            assert_eq!(text.parse(), Ok(version), "{text}");
        }
    }

    #[test]
    fn refuses_other_releases_and_garbage() {
        for text in [
            "1.31", "1.33", "1.38", "1.3", "2.30", "1.30.x", "1.30.1.2", "", "latest",
        ] {
            let error = text.parse::<KubernetesVersion>().unwrap_err();
            assert!(
                error.to_string().contains("1.30, 1.34, 1.35, 1.36, 1.37"),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn default_is_1_30_and_every_later_release_is_of_the_v1_generation() {
        assert_eq!(KubernetesVersion::default().as_str(), "1.30");
        assert!(!KubernetesVersion::default().serves_v1());
        assert_eq!(
            KubernetesVersion::v1_releases().collect::<Vec<_>>(),
            [
                KubernetesVersion::V1_34,
                KubernetesVersion::V1_35,
                KubernetesVersion::V1_36,
                KubernetesVersion::V1_37
            ]
        );
        assert_eq!(KubernetesVersion::V1_37.git_version(), "v1.37.0");
        assert_eq!(KubernetesVersion::choices(), "1.30|1.34|1.35|1.36|1.37");
    }
}
