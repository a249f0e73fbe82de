//! What a Kubernetes 1.30 kubelet accepts when a plugin registers: the plugin type, the endpoint
//! to dial, and `supported_versions` read as `utilversion.HighestSupportedVersion` reads them
//! (entries parsed as generic versions, unparsable ones and majors above 1 skipped, the highest
//! must be a 1.x), with a second plugin of a registered name accepted only with a higher version.
//!
//! Pure decisions, no I/O: written from the 1.30 behaviour, not shared with the node agent, so
//! that the simulated kubelet checks the agent instead of agreeing with it by construction.

use std::cmp::Ordering;
use std::fmt;
use std::path::{Path, PathBuf};

use dra_types::kubelet::pluginregistration::PluginInfo;

use super::error::{SupportedVersionError, V1alpha2Refusal, VersionError};

/// The registration type of a DRA plugin.
pub(crate) const DRA_PLUGIN_TYPE: &str = "DRAPlugin";

/// A version of two or more numeric components (apimachinery's generic version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version(Vec<u64>);

impl Version {
    /// Parses `text` as `ParseGeneric` does: blanks, an optional `v`, at least two dot-separated
    /// numbers; whatever follows the numbers (a pre-release, build metadata) is ignored.
    pub(crate) fn parse_generic(text: &str) -> Result<Version, VersionError> {
        let trimmed = text.trim();
        let rest = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let numeric_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let numeric = &rest[..numeric_end];
        if numeric.is_empty() || !numeric.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(VersionError::Unparsable {
                text: text.to_owned(),
            });
        }
        // A trailing dot ("1.2.") is not part of the numbers.
        let numeric = numeric.trim_end_matches('.');
        let parts: Vec<&str> = numeric.split('.').collect();
        if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
            return Err(VersionError::Components {
                text: text.to_owned(),
            });
        }
        parts
            .iter()
            .map(|p| {
                p.parse::<u64>().map_err(|source| VersionError::Component {
                    component: (*p).to_owned(),
                    source,
                })
            })
            .collect::<Result<Vec<u64>, VersionError>>()
            .map(Version)
    }

    /// The first component.
    pub(crate) fn major(&self) -> u64 {
        self.0.first().copied().unwrap_or(0)
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.0.len().max(other.0.len());
        (0..len)
            .map(|i| {
                let a = self.0.get(i).copied().unwrap_or(0);
                let b = other.0.get(i).copied().unwrap_or(0);
                a.cmp(&b)
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        write!(f, "{}", parts.join("."))
    }
}

/// The highest version of `versions` a 1.30 kubelet supports (`HighestSupportedVersion`).
pub(crate) fn highest_supported_version(
    versions: &[String],
) -> Result<Version, SupportedVersionError> {
    if versions.is_empty() {
        return Err(SupportedVersionError::Empty);
    }
    let mut highest: Option<Version> = None;
    let mut last = None;
    for text in versions.iter().rev() {
        match Version::parse_generic(text) {
            Err(error) => last = Some(error),
            Ok(version) if version.major() > 1 => {}
            Ok(version) => {
                if highest.as_ref().is_none_or(|h| *h < version) {
                    highest = Some(version);
                }
            }
        }
    }
    let Some(highest) = highest else {
        return Err(SupportedVersionError::NoneFound {
            versions: versions.to_vec(),
            last,
        });
    };
    if highest.major() != 1 {
        return Err(SupportedVersionError::NotV1 { highest });
    }
    Ok(highest)
}

/// The service socket of a DRA plugin from its `GetInfo` answer at `socket`: its endpoint, or
/// the registration socket when that is empty; `None` when it is not a DRA plugin.
pub(super) fn dra_endpoint(socket: &Path, info: &PluginInfo) -> Option<PathBuf> {
    if info.r#type != DRA_PLUGIN_TYPE {
        return None;
    }
    Some(if info.endpoint.is_empty() {
        socket.to_owned()
    } else {
        PathBuf::from(&info.endpoint)
    })
}

/// A plugin the kubelet accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Accepted {
    /// The driver name.
    pub name: String,
    /// The socket of the plugin's `v1alpha3.Node` service.
    pub endpoint: PathBuf,
    /// The highest supported version, compared when the name registers again.
    pub version: Version,
}

/// The 1.30 kubelet's verdict on a plugin's `GetInfo` answer at `socket`. `registered` is the
/// version of the plugin already registered under the same name, if any. `Err` is the error
/// reported back through `NotifyRegistrationStatus`.
pub(crate) fn accept(
    socket: &Path,
    info: &PluginInfo,
    registered: Option<&Version>,
) -> Result<Accepted, V1alpha2Refusal> {
    let Some(endpoint) = dra_endpoint(socket, info) else {
        return Err(V1alpha2Refusal::PluginType {
            kind: info.r#type.clone(),
            socket: socket.to_owned(),
        });
    };
    let (name, versions) = (&info.name, &info.supported_versions);
    let name = name.to_owned();
    if versions.is_empty() {
        return Err(V1alpha2Refusal::NoVersions { name });
    }
    let version = match highest_supported_version(versions) {
        Ok(version) => version,
        Err(source) => {
            return Err(V1alpha2Refusal::Versions {
                name,
                versions: versions.clone(),
                source,
            })
        }
    };
    if let Some(existing) = registered {
        if *existing >= version {
            return Err(V1alpha2Refusal::HigherVersionRegistered {
                name,
                existing: existing.clone(),
            });
        }
    }
    Ok(Accepted {
        name,
        endpoint,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::plugins::{list, plugin};

    #[test]
    fn generic_versions_need_two_numbers_and_may_start_with_v() {
        assert_eq!(
            Version::parse_generic("1.0.0").unwrap().to_string(),
            "1.0.0"
        );
        assert_eq!(Version::parse_generic("v1.2").unwrap().to_string(), "1.2");
        assert_eq!(
            Version::parse_generic(" 1.2.3-beta.1 ")
                .unwrap()
                .to_string(),
            "1.2.3"
        );
        for bad in ["1", "v1", "v1alpha3", "v1.DRAPlugin", "DRAPlugin", "", "v"] {
            assert!(Version::parse_generic(bad).is_err(), "{bad}");
        }
        assert!(Version::parse_generic("1.10").unwrap() > Version::parse_generic("1.9.9").unwrap());
        assert_eq!(
            Version::parse_generic("1.0")
                .unwrap()
                .cmp(&Version::parse_generic("1.0.0").unwrap()),
            Ordering::Equal
        );
    }

    #[test]
    fn the_highest_one_point_x_wins_and_unparsable_or_newer_majors_are_skipped() {
        let v = highest_supported_version(&list(&["v1.DRAPlugin", "1.0.0", "1.2", "2.0.0"]));
        assert_eq!(v.unwrap().to_string(), "1.2");
        assert!(highest_supported_version(&list(&["1.0.0"])).is_ok());
    }

    #[test]
    fn lists_without_a_one_point_x_are_refused() {
        let none = highest_supported_version(&list(&["v1alpha3", "v1.DRAPlugin"]))
            .unwrap_err()
            .to_string();
        assert!(
            none.contains("could not find a highest supported version"),
            "{none}"
        );
        assert!(none.contains("illegal version string"), "{none}");
        let zero = highest_supported_version(&list(&["0.3.0"]))
            .unwrap_err()
            .to_string();
        assert!(zero.contains("must be v1.x"), "{zero}");
        assert!(highest_supported_version(&list(&["2.0.0"])).is_err());
        assert!(highest_supported_version(&[]).is_err());
    }

    #[test]
    fn only_dra_plugins_are_accepted_and_an_empty_endpoint_means_the_socket() {
        let socket = Path::new("/k/plugins_registry/d.sock");
        let versions = list(&["1.0.0"]);
        let csi = accept(socket, &plugin("CSIPlugin", "d", "", &versions), None)
            .unwrap_err()
            .to_string();
        assert!(
            csi.contains("no handler registered for plugin type: CSIPlugin"),
            "{csi}"
        );
        let ok = accept(socket, &plugin(DRA_PLUGIN_TYPE, "d", "", &versions), None).unwrap();
        assert_eq!(ok.endpoint, socket);
        let ok = accept(
            socket,
            &plugin(DRA_PLUGIN_TYPE, "d", "/k/plugins/d/plugin.sock", &versions),
            None,
        )
        .unwrap();
        assert_eq!(ok.endpoint, Path::new("/k/plugins/d/plugin.sock"));
        assert!(accept(socket, &plugin(DRA_PLUGIN_TYPE, "d", "", &[]), None).is_err());
        assert!(accept(
            socket,
            &plugin(DRA_PLUGIN_TYPE, "d", "", &list(&["v1alpha3"])),
            None
        )
        .is_err());
    }

    #[test]
    fn a_second_plugin_of_a_name_needs_a_higher_version() {
        let socket = Path::new("/k/plugins_registry/d2.sock");
        let old = Version::parse_generic("1.0.0").unwrap();
        let same = accept(
            socket,
            &plugin(DRA_PLUGIN_TYPE, "d", "", &list(&["1.0.0"])),
            Some(&old),
        );
        assert!(same.unwrap_err().to_string().contains("already registered"));
        let higher = accept(
            socket,
            &plugin(DRA_PLUGIN_TYPE, "d", "", &list(&["1.1.0"])),
            Some(&old),
        );
        assert_eq!(higher.unwrap().version.to_string(), "1.1.0");
    }
}
