//! The Kubernetes release the simulated cluster behaves as: 1.30 (`v1alpha2` DRA,
//! `resource.k8s.io/v1alpha2`, the default) or 1.34 (`resource.k8s.io/v1`).
//!
//! One value is chosen per cluster and given to the API server (which resources it serves, in
//! which shape) and to the actors (which controllers run, how the kubelet talks to plugins).

use std::fmt;
use std::str::FromStr;

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
}

impl KubernetesVersion {
    /// Every version, oldest first.
    pub const ALL: [KubernetesVersion; 2] = [KubernetesVersion::V1_30, KubernetesVersion::V1_34];

    /// `1.30` or `1.34`.
    pub fn as_str(self) -> &'static str {
        match self {
            KubernetesVersion::V1_30 => "1.30",
            KubernetesVersion::V1_34 => "1.34",
        }
    }

    /// The minor version: 30 or 34.
    pub fn minor(self) -> u32 {
        match self {
            KubernetesVersion::V1_30 => 30,
            KubernetesVersion::V1_34 => 34,
        }
    }

    /// The `gitVersion` the server reports at `/version`.
    pub fn git_version(self) -> &'static str {
        match self {
            KubernetesVersion::V1_30 => "v1.30.0",
            KubernetesVersion::V1_34 => "v1.34.0",
        }
    }

    /// Whether this release serves `resource.k8s.io/v1` instead of `resource.k8s.io/v1alpha2`.
    pub fn serves_v1(self) -> bool {
        self == KubernetesVersion::V1_34
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version string that names no release the simulator plays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported Kubernetes version {0:?}: the simulator plays 1.30 or 1.34")]
pub struct UnsupportedVersion(pub String);

impl FromStr for KubernetesVersion {
    type Err = UnsupportedVersion;

    /// Accepts `1.30`, `v1.30`, `1.30.x` and the same for 1.34.
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
    fn parses_both_releases_with_or_without_v_and_patch() {
        for text in ["1.30", "v1.30", "1.30.14"] {
            assert_eq!(text.parse(), Ok(KubernetesVersion::V1_30), "{text}");
        }
        for text in ["1.34", "v1.34.0"] {
            assert_eq!(text.parse(), Ok(KubernetesVersion::V1_34), "{text}");
        }
    }

    #[test]
    fn refuses_other_releases_and_garbage() {
        for text in ["1.31", "1.3", "2.30", "1.30.x", "1.30.1.2", "", "latest"] {
            let error = text.parse::<KubernetesVersion>().unwrap_err();
            assert!(
                error.to_string().contains("1.30 or 1.34"),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn default_is_1_30() {
        assert_eq!(KubernetesVersion::default().as_str(), "1.30");
        assert!(!KubernetesVersion::default().serves_v1());
        assert!(KubernetesVersion::V1_34.serves_v1());
    }
}
