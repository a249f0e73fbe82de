//! The release table: for each Kubernetes release the simulator plays, the facts that differ
//! (DRA generation, the `resource.k8s.io` versions and kinds it can serve and which of them are
//! on by default, the DRA feature gates on by default and those locked), and the selection a
//! server makes from them with `--feature-gates` and `--runtime-config` ([`ServedApi`]).
//!
//! Sources (kubernetes/kubernetes): the versioned feature-gate specs of the DRA gates,
//! `pkg/registry/resource/rest/storage_resource.go` (the versions and kinds of the group) and
//! `DefaultAPIResourceConfigSource` (beta and alpha API versions are off by default: only
//! `resource.k8s.io/v1` is served unless `--runtime-config` enables another). `docs/simulator.md`
//! lists the table in words.
//!
//! Pure data and lookups; no server, store or actor dependencies.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::KubernetesVersion;

/// The DRA API generation of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// `resource.k8s.io/v1alpha2`: classic DRA, the controller allocates.
    V1alpha2,
    /// `resource.k8s.io/v1`: structured parameters, the scheduler allocates.
    V1,
}

/// A DRA feature gate whose default differs between the releases played, or that decides which
/// fields the API server keeps (`dropDisabledFields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FeatureGate {
    /// `adminAccess` in requests and allocation results (KEP 5018).
    DRAAdminAccess,
    /// `allowMultipleAllocations`, capacity `requestPolicy`, request `capacity`, constraint
    /// `distinctAttribute`, `consumedCapacity` and `shareID` (KEP 5075).
    DRAConsumableCapacity,
    /// Device and result `bindingConditions`, `bindingFailureConditions`, `bindsToNode` and
    /// the allocation's `allocationTimestamp` (KEP 5007; needs the device status gate too).
    DRADeviceBindingConditions,
    /// The `DeviceTaintRule` controller (KEP 5055).
    DRADeviceTaintRules,
    /// Device `taints` and request `tolerations` (KEP 5055).
    DRADeviceTaints,
    /// `DeviceClass.spec.extendedResourceName` (KEP 5004).
    DRAExtendedResource,
    /// `sharedCounters`, `consumesCounters` and per-device node selection (KEP 4815).
    DRAPartitionableDevices,
    /// `firstAvailable` (KEP 4816).
    DRAPrioritizedList,
    /// `status.devices` of claims (KEP 4817).
    DRAResourceClaimDeviceStatus,
    /// `allocatedResourcesStatus` of a pod's container statuses, which the kubelet fills from
    /// the plugins' `DRAResourceHealth` streams (KEP 4680).
    ResourceHealthStatus,
    /// The `message` of those entries (KEP 4680).
    ResourceHealthStatusMessage,
}

impl FeatureGate {
    /// Every gate, in name order.
    pub const ALL: [FeatureGate; 11] = [
        FeatureGate::DRAAdminAccess,
        FeatureGate::DRAConsumableCapacity,
        FeatureGate::DRADeviceBindingConditions,
        FeatureGate::DRADeviceTaintRules,
        FeatureGate::DRADeviceTaints,
        FeatureGate::DRAExtendedResource,
        FeatureGate::DRAPartitionableDevices,
        FeatureGate::DRAPrioritizedList,
        FeatureGate::DRAResourceClaimDeviceStatus,
        FeatureGate::ResourceHealthStatus,
        FeatureGate::ResourceHealthStatusMessage,
    ];

    /// The gate's name, as `--feature-gates` spells it.
    pub fn name(self) -> &'static str {
        match self {
            FeatureGate::DRAAdminAccess => "DRAAdminAccess",
            FeatureGate::DRAConsumableCapacity => "DRAConsumableCapacity",
            FeatureGate::DRADeviceBindingConditions => "DRADeviceBindingConditions",
            FeatureGate::DRADeviceTaintRules => "DRADeviceTaintRules",
            FeatureGate::DRADeviceTaints => "DRADeviceTaints",
            FeatureGate::DRAExtendedResource => "DRAExtendedResource",
            FeatureGate::DRAPartitionableDevices => "DRAPartitionableDevices",
            FeatureGate::DRAPrioritizedList => "DRAPrioritizedList",
            FeatureGate::DRAResourceClaimDeviceStatus => "DRAResourceClaimDeviceStatus",
            FeatureGate::ResourceHealthStatus => "ResourceHealthStatus",
            FeatureGate::ResourceHealthStatusMessage => "ResourceHealthStatusMessage",
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

impl fmt::Display for FeatureGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of enabled [`FeatureGate`]s of a server (cheap to copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct FeatureGates(u16);

impl FeatureGates {
    /// The gates in `gates`.
    pub fn of(gates: &[FeatureGate]) -> Self {
        Self(gates.iter().fold(0, |bits, g| bits | g.bit()))
    }

    /// Whether `gate` is enabled.
    pub fn enabled(self, gate: FeatureGate) -> bool {
        self.0 & gate.bit() != 0
    }

    /// The set with `gate` switched to `on`.
    #[must_use]
    pub fn with(self, gate: FeatureGate, on: bool) -> Self {
        if on {
            Self(self.0 | gate.bit())
        } else {
            Self(self.0 & !gate.bit())
        }
    }
}

/// One version of `resource.k8s.io` a release can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupVersionFacts {
    /// `v1`, `v1beta2`, `v1beta1`, `v1alpha3`.
    pub version: &'static str,
    /// The kinds served in that version.
    pub kinds: &'static [&'static str],
    /// Whether the version is served without `--runtime-config`.
    pub on_by_default: bool,
}

/// One row of the release table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseFacts {
    /// The release.
    pub version: KubernetesVersion,
    /// `1.30`, `1.34`, ...
    pub name: &'static str,
    /// The minor version.
    pub minor: u32,
    /// What `/version` reports.
    pub git_version: &'static str,
    /// The DRA generation.
    pub generation: Generation,
    /// The `resource.k8s.io` versions of the `v1` generation, preferred first (1.30's
    /// `v1alpha2` kinds are the server's built-in table).
    pub resource_versions: &'static [GroupVersionFacts],
    /// The DRA gates on by default.
    pub gates_on: &'static [FeatureGate],
    /// The gates locked to their default (GA with `LockToDefault`).
    pub gates_locked: &'static [FeatureGate],
}

/// The four kinds of every `resource.k8s.io` version of the `v1` generation.
const CORE: [&str; 4] = [
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
];
const CORE_AND_RULES: [&str; 5] = [
    "DeviceClass",
    "DeviceTaintRule",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
];
const RULES: [&str; 1] = ["DeviceTaintRule"];

const fn gv(
    version: &'static str,
    kinds: &'static [&'static str],
    on_by_default: bool,
) -> GroupVersionFacts {
    GroupVersionFacts {
        version,
        kinds,
        on_by_default,
    }
}

/// 1.34 and 1.35: `DeviceTaintRule` only in the alpha version.
const VERSIONS_1_34: [GroupVersionFacts; 4] = [
    gv("v1", &CORE, true),
    gv("v1beta2", &CORE, false),
    gv("v1beta1", &CORE, false),
    gv("v1alpha3", &RULES, false),
];
/// 1.36: `DeviceTaintRule` beta, in the (off by default) `v1beta2`.
const VERSIONS_1_36: [GroupVersionFacts; 4] = [
    gv("v1", &CORE, true),
    gv("v1beta2", &CORE_AND_RULES, false),
    gv("v1beta1", &CORE, false),
    gv("v1alpha3", &RULES, false),
];
/// 1.37: `DeviceTaintRule` GA, served in `v1`.
const VERSIONS_1_37: [GroupVersionFacts; 4] = [
    gv("v1", &CORE_AND_RULES, true),
    gv("v1beta2", &CORE_AND_RULES, false),
    gv("v1beta1", &CORE, false),
    gv("v1alpha3", &RULES, false),
];

/// The gates on by default in 1.34 and 1.35 (the betas of 1.34).
const GATES_1_34: [FeatureGate; 3] = [
    FeatureGate::DRAAdminAccess,
    FeatureGate::DRAPrioritizedList,
    FeatureGate::DRAResourceClaimDeviceStatus,
];
/// 1.36: the sharing, taint, binding-condition, extended-resource and resource-health features
/// turn beta and on; `DRADeviceTaintRules` is beta but off (it needs the off-by-default
/// `v1beta2`). (`ResourceHealthStatus` was alpha and off from 1.31 to 1.35.)
const GATES_1_36: [FeatureGate; 10] = [
    FeatureGate::DRAAdminAccess,
    FeatureGate::DRAConsumableCapacity,
    FeatureGate::DRADeviceBindingConditions,
    FeatureGate::DRADeviceTaints,
    FeatureGate::DRAExtendedResource,
    FeatureGate::DRAPartitionableDevices,
    FeatureGate::DRAPrioritizedList,
    FeatureGate::DRAResourceClaimDeviceStatus,
    FeatureGate::ResourceHealthStatus,
    FeatureGate::ResourceHealthStatusMessage,
];
/// 1.37: every gate here is on.
const GATES_1_37: [FeatureGate; 11] = FeatureGate::ALL;

/// The release table, oldest first.
const RELEASES: [ReleaseFacts; 5] = [
    ReleaseFacts {
        version: KubernetesVersion::V1_30,
        name: "1.30",
        minor: 30,
        git_version: "v1.30.0",
        generation: Generation::V1alpha2,
        resource_versions: &[],
        gates_on: &[],
        gates_locked: &[],
    },
    ReleaseFacts {
        version: KubernetesVersion::V1_34,
        name: "1.34",
        minor: 34,
        git_version: "v1.34.0",
        generation: Generation::V1,
        resource_versions: &VERSIONS_1_34,
        gates_on: &GATES_1_34,
        gates_locked: &[],
    },
    ReleaseFacts {
        version: KubernetesVersion::V1_35,
        name: "1.35",
        minor: 35,
        git_version: "v1.35.0",
        generation: Generation::V1,
        resource_versions: &VERSIONS_1_34,
        gates_on: &GATES_1_34,
        gates_locked: &[],
    },
    ReleaseFacts {
        version: KubernetesVersion::V1_36,
        name: "1.36",
        minor: 36,
        git_version: "v1.36.0",
        generation: Generation::V1,
        resource_versions: &VERSIONS_1_36,
        gates_on: &GATES_1_36,
        gates_locked: &[FeatureGate::DRAAdminAccess],
    },
    ReleaseFacts {
        version: KubernetesVersion::V1_37,
        name: "1.37",
        minor: 37,
        git_version: "v1.37.0",
        generation: Generation::V1,
        resource_versions: &VERSIONS_1_37,
        gates_on: &GATES_1_37,
        gates_locked: &[
            FeatureGate::DRAAdminAccess,
            FeatureGate::DRAExtendedResource,
            FeatureGate::DRAPrioritizedList,
            FeatureGate::DRAResourceClaimDeviceStatus,
        ],
    },
];

impl ReleaseFacts {
    /// The row of `version`.
    pub fn of(version: KubernetesVersion) -> &'static ReleaseFacts {
        RELEASES
            .iter()
            .find(|r| r.version == version)
            .unwrap_or(&RELEASES[0])
    }

    /// The gates on by default.
    pub fn default_gates(&self) -> FeatureGates {
        FeatureGates::of(self.gates_on)
    }
}

/// A `--feature-gates` or `--runtime-config` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiSelectionError {
    /// A gate name the simulator does not know.
    #[error("unrecognized feature gate: {0}")]
    UnknownGate(String),
    /// A `NAME=VALUE` whose value is not a boolean, or a part without `=`.
    #[error("invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax")]
    InvalidBool {
        /// The gate or group version.
        name: String,
        /// The value given.
        value: String,
    },
    /// A part of `--feature-gates` without `=`.
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// A gate locked to its default set to the other value.
    #[error("cannot set feature gate {gate} to {value}, feature is locked to {locked}")]
    LockedGate {
        /// The gate.
        gate: FeatureGate,
        /// The value asked for.
        value: bool,
        /// The value it is locked to.
        locked: bool,
    },
    /// A group version the release does not have.
    #[error(
        "runtime-config: {group_version} is not served by Kubernetes {release} (known: {known})"
    )]
    UnknownGroupVersion {
        /// `group/version` as given.
        group_version: String,
        /// The release played.
        release: KubernetesVersion,
        /// The versions it can serve.
        known: String,
    },
}

fn parse_bool(name: &str, value: &str) -> Result<bool, ApiSelectionError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(ApiSelectionError::InvalidBool {
            name: name.to_owned(),
            value: value.to_owned(),
        }),
    }
}

/// `--feature-gates`: `NAME=true|false` pairs separated by commas, as kube-apiserver takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGateSettings(pub BTreeMap<FeatureGate, bool>);

impl FromStr for FeatureGateSettings {
    type Err = ApiSelectionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut settings = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| ApiSelectionError::MissingValue(part.to_owned()))?;
            let (name, value) = (name.trim(), value.trim());
            let gate = FeatureGate::ALL
                .into_iter()
                .find(|g| g.name() == name)
                .ok_or_else(|| ApiSelectionError::UnknownGate(name.to_owned()))?;
            settings.insert(gate, parse_bool(name, value)?);
        }
        Ok(Self(settings))
    }
}

/// `--runtime-config`: `group/version[=true|false]` entries separated by commas (a bare entry
/// enables), as kube-apiserver takes them for API versions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeConfig(pub BTreeMap<String, bool>);

impl FromStr for RuntimeConfig {
    type Err = ApiSelectionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut entries = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, on) = match part.split_once('=') {
                Some((key, value)) => (key.trim(), parse_bool(key, value.trim())?),
                None => (part, true),
            };
            entries.insert(key.to_owned(), on);
        }
        Ok(Self(entries))
    }
}

/// What a server is told beyond its release: feature gates and API versions switched on or off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiOverrides {
    /// `--feature-gates`.
    pub feature_gates: FeatureGateSettings,
    /// `--runtime-config`.
    pub runtime_config: RuntimeConfig,
}

/// What a server playing a release serves: its gates and its `resource.k8s.io` versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedApi {
    /// The release.
    pub release: KubernetesVersion,
    /// The enabled gates.
    pub gates: FeatureGates,
    /// The served `resource.k8s.io` versions of the `v1` generation, preferred first.
    pub resource_versions: Vec<GroupVersionFacts>,
}

impl ServedApi {
    /// What `release` serves by default.
    pub fn defaults(release: KubernetesVersion) -> Self {
        let facts = release.facts();
        Self {
            release,
            gates: facts.default_gates(),
            resource_versions: facts
                .resource_versions
                .iter()
                .filter(|v| v.on_by_default)
                .copied()
                .collect(),
        }
    }

    /// What `release` serves with `overrides`.
    pub fn new(
        release: KubernetesVersion,
        overrides: &ApiOverrides,
    ) -> Result<Self, ApiSelectionError> {
        let facts = release.facts();
        let mut gates = facts.default_gates();
        for (&gate, &value) in &overrides.feature_gates.0 {
            let locked = facts.default_gates().enabled(gate);
            if facts.gates_locked.contains(&gate) && value != locked {
                return Err(ApiSelectionError::LockedGate {
                    gate,
                    value,
                    locked,
                });
            }
            gates = gates.with(gate, value);
        }
        let group = dra_types::resource_v1::GROUP;
        let mut wanted: BTreeMap<&str, bool> = BTreeMap::new();
        for (key, &on) in &overrides.runtime_config.0 {
            let version = key
                .strip_prefix(group)
                .and_then(|rest| rest.strip_prefix('/'))
                .filter(|v| facts.resource_versions.iter().any(|f| f.version == *v));
            let Some(version) = version else {
                return Err(ApiSelectionError::UnknownGroupVersion {
                    group_version: key.clone(),
                    release,
                    known: facts
                        .resource_versions
                        .iter()
                        .map(|f| format!("{group}/{}", f.version))
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            };
            wanted.insert(version, on);
        }
        let resource_versions = facts
            .resource_versions
            .iter()
            .filter(|f| wanted.get(f.version).copied().unwrap_or(f.on_by_default))
            .copied()
            .collect();
        Ok(Self {
            release,
            gates,
            resource_versions,
        })
    }
}

#[cfg(test)]
mod tests;
