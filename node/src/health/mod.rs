//! The health of this node's devices: what each source observes ([`Observation`]), the sources
//! behind one trait ([`HealthSource`]: [`file`](mod@file), [`aer`], [`xid`] for NVML), the
//! debouncing of their changes ([`debounce`]) and the health the agent publishes per device
//! ([`DeviceHealth`], by name in a [`HealthMap`]).
//!
//! An unhealthy device is tainted in the node's `ResourceSlice` (`v1`), left out of the
//! published inventory (`v1alpha2`) and reported to the kubelet's `DRAResourceHealth` stream;
//! those uses live with the slices and the gRPC services. This module reads files and (for
//! NVML) a library only; it never talks to Kubernetes and knows nothing of claims.
//!
//! The reasons ([`Reason`]) are label values, so that they can be a taint's value.

pub mod aer;
pub mod debounce;
pub mod file;
pub mod xid;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::device::Inventory;

/// The health of a device, as the kubelet's health API and the file inventory spell it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum HealthState {
    /// Operating normally.
    #[default]
    Healthy,
    /// The health cannot be determined.
    Unknown,
    /// A failure was observed: the device takes no new work.
    Unhealthy,
}

impl HealthState {
    /// The name (`Healthy`, `Unhealthy`, `Unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Healthy => "Healthy",
            HealthState::Unknown => "Unknown",
            HealthState::Unhealthy => "Unhealthy",
        }
    }
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `health` value that is none of the three.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown health {0:?}: expected Healthy, Unhealthy or Unknown")]
pub struct HealthStateParse(pub String);

impl FromStr for HealthState {
    type Err = HealthStateParse;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "Healthy" => Ok(HealthState::Healthy),
            "Unhealthy" => Ok(HealthState::Unhealthy),
            "Unknown" => Ok(HealthState::Unknown),
            other => Err(HealthStateParse(other.to_owned())),
        }
    }
}

/// Why a device is not healthy: the value of its `<driver>/unhealthy` taint, so every name is
/// a valid label value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Reason {
    /// NVML reported an Xid that NVIDIA's driver does not count as an application error.
    XidCritical,
    /// NVML reported a double-bit (uncorrectable) ECC error.
    EccDoubleBit,
    /// NVML lost the GPU (fallen off the bus, or its handle or events fail).
    GpuLost,
    /// The PCI Express fatal error counter (`aer_dev_fatal`) grew.
    PcieAerFatal,
    /// The PCI Express non-fatal error counter (`aer_dev_nonfatal`) grew.
    PcieAerNonFatal,
    /// The PCI Express link reports width 0.
    LinkDown,
    /// The device's PCI function is gone from the bus.
    Gone,
    /// The inventory file marks the device (`health: Unhealthy` or `Unknown`).
    Marked,
}

impl Reason {
    /// Every reason, in the order of the documentation.
    pub const ALL: [Reason; 8] = [
        Reason::XidCritical,
        Reason::EccDoubleBit,
        Reason::GpuLost,
        Reason::PcieAerFatal,
        Reason::PcieAerNonFatal,
        Reason::LinkDown,
        Reason::Gone,
        Reason::Marked,
    ];

    /// The name, a label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::XidCritical => "XidCritical",
            Reason::EccDoubleBit => "EccDoubleBit",
            Reason::GpuLost => "GpuLost",
            Reason::PcieAerFatal => "PcieAerFatal",
            Reason::PcieAerNonFatal => "PcieAerNonFatal",
            Reason::LinkDown => "LinkDown",
            Reason::Gone => "Gone",
            Reason::Marked => "Marked",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one source says of one device now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The state observed.
    pub state: HealthState,
    /// Why it is not healthy (`None` when healthy).
    pub reason: Option<Reason>,
    /// A human-readable detail (`Xid 79 (fallen off the bus)`, the file's `healthMessage`).
    pub message: Option<String>,
}

impl Observation {
    /// A failure of `reason` with `message`.
    pub fn unhealthy(reason: Reason, message: impl Into<String>) -> Self {
        Observation {
            state: HealthState::Unhealthy,
            reason: Some(reason),
            message: Some(message.into()),
        }
    }

    /// Whichever of `self` and `other` is worse (Unhealthy over Unknown over Healthy; the first
    /// among equals).
    #[must_use]
    pub fn worst(self, other: Observation) -> Observation {
        if other.state > self.state {
            other
        } else {
            self
        }
    }
}

/// What a source observes, by device name; a device it says nothing of is healthy to it.
pub type Observations = BTreeMap<String, Observation>;

/// The health the agent publishes for a device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceHealth {
    /// The state.
    pub state: HealthState,
    /// Why it is not healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// The detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the device entered this state (for an unhealthy device: the taint's `timeAdded`).
    pub since: DateTime<Utc>,
}

impl DeviceHealth {
    /// Healthy since `since`.
    pub fn healthy(since: DateTime<Utc>) -> Self {
        DeviceHealth {
            state: HealthState::Healthy,
            reason: None,
            message: None,
            since,
        }
    }

    /// Whether the device is unhealthy (and so tainted or withheld).
    pub fn is_unhealthy(&self) -> bool {
        self.state == HealthState::Unhealthy
    }
}

/// The published health of the devices, by name.
pub type HealthMap = BTreeMap<String, DeviceHealth>;

/// The devices of `inventory` that `health` does not call unhealthy: the inventory a `v1alpha2`
/// kubelet gets, so that the controller allocates no unhealthy device.
pub fn without_unhealthy(inventory: &Inventory, health: &HealthMap) -> Inventory {
    inventory
        .iter()
        .filter(|(name, _)| !health.get(*name).is_some_and(DeviceHealth::is_unhealthy))
        .map(|(name, device)| (name.clone(), device.clone()))
        .collect()
}

/// Why a source could not observe.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HealthError {
    /// The inventory file (with its health fields) could not be read.
    #[error(transparent)]
    File(#[from] crate::discovery::DiscoveryError),
    /// A sysfs file could not be read.
    #[error("reading {path}: {source}")]
    Sysfs {
        /// The file.
        path: std::path::PathBuf,
        /// What the read returned.
        #[source]
        source: std::io::Error,
    },
}

/// A source of device health, asked once per round (every `--inventory-interval`, on SIGHUP and
/// when an event source wakes the agent).
pub trait HealthSource: Send {
    /// The source's name in logs (`file`, `sysfs`, `nvml`).
    fn name(&self) -> &'static str;

    /// What the source observes now of the devices of `inventory`.
    ///
    /// # Errors
    /// The source could not be read; the agent keeps the last health and logs it.
    fn observe(&mut self, inventory: &Inventory) -> Result<Observations, HealthError>;
}

/// What all `sources` observe, the worst per device; a source that fails is logged and its
/// devices keep what the others say.
pub fn observe_all(sources: &mut [Box<dyn HealthSource>], inventory: &Inventory) -> Observations {
    let mut all = Observations::new();
    for source in sources.iter_mut() {
        match source.observe(inventory) {
            Ok(observed) => {
                for (name, observation) in observed {
                    let merged = match all.remove(&name) {
                        Some(before) => before.worst(observation),
                        None => observation,
                    };
                    all.insert(name, merged);
                }
            }
            Err(error) => {
                tracing::warn!(source = source.name(), %error, "Failed to read device health; keeping the last");
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::NodeDevice;

    #[test]
    fn the_worst_observation_wins_and_the_first_among_equals() {
        let healthy = Observation {
            state: HealthState::Healthy,
            reason: None,
            message: None,
        };
        let unknown = Observation {
            state: HealthState::Unknown,
            reason: Some(Reason::Marked),
            message: None,
        };
        let fatal = Observation::unhealthy(Reason::PcieAerFatal, "fatal");
        let xid = Observation::unhealthy(Reason::XidCritical, "xid");
        assert_eq!(healthy.clone().worst(unknown.clone()), unknown);
        assert_eq!(unknown.clone().worst(healthy), unknown);
        assert_eq!(unknown.worst(fatal.clone()), fatal);
        assert_eq!(fatal.clone().worst(xid), fatal);
    }

    #[test]
    fn the_v1alpha2_inventory_leaves_out_unhealthy_devices_only() {
        let device = |name: &str| NodeDevice {
            name: name.to_owned(),
            ..NodeDevice::default()
        };
        let inventory: Inventory = ["gpu-0", "gpu-1", "gpu-2"]
            .into_iter()
            .map(|n| (n.to_owned(), device(n)))
            .collect();
        let since = DateTime::<Utc>::UNIX_EPOCH;
        let health = HealthMap::from([
            (
                "gpu-1".to_owned(),
                DeviceHealth {
                    state: HealthState::Unhealthy,
                    reason: Some(Reason::Marked),
                    message: None,
                    since,
                },
            ),
            (
                "gpu-2".to_owned(),
                DeviceHealth {
                    state: HealthState::Unknown,
                    reason: Some(Reason::Marked),
                    message: None,
                    since,
                },
            ),
        ]);
        let published = without_unhealthy(&inventory, &health);
        assert_eq!(
            published.keys().collect::<Vec<_>>(),
            ["gpu-0", "gpu-2"],
            "an Unknown device stays: only Unhealthy takes a device out"
        );
    }

    #[test]
    fn reasons_are_label_values_and_states_parse_back() {
        for reason in Reason::ALL {
            let text = reason.as_str();
            assert!(text.len() <= 63 && text.bytes().all(|b| b.is_ascii_alphanumeric()));
        }
        for state in [
            HealthState::Healthy,
            HealthState::Unhealthy,
            HealthState::Unknown,
        ] {
            assert_eq!(state.as_str().parse::<HealthState>(), Ok(state));
        }
        assert!("healthy".parse::<HealthState>().is_err());
    }
}
