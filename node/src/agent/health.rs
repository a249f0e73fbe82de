//! The agent's device health: the sources `--devices` implies (`file:` its file's `health`
//! fields; `sysfs` the AER counters, link and presence of each PCI function; `nvml` NVML's
//! events and the sysfs checks of the same GPUs), asked once per round, debounced, logged once
//! per change, counted, and published on a watch channel that the slice publisher, the
//! `v1alpha2` inventory stream and the kubelet's health stream read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::chrono::Utc;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::device::Inventory;
use crate::discovery::{DeviceSource, DiscoveryRoots};
use crate::health::aer::AerHealth;
use crate::health::debounce::{Debouncer, HealthChange};
use crate::health::file::FileHealth;
use crate::health::{observe_all, HealthMap, HealthSource, HealthState};
use crate::metrics::NodeMetrics;
use crate::v1::taints::TaintEffect;

/// How device health is judged and shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthConfig {
    /// How long every source must say Healthy before a device that was not is healthy again
    /// (`--health-settle-time`).
    pub settle: Duration,
    /// The effect of an unhealthy device's taint in `v1` mode (`--unhealthy-taint-effect`).
    pub taint_effect: TaintEffect,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            settle: Duration::from_secs(60),
            taint_effect: TaintEffect::NoSchedule,
        }
    }
}

/// The sources, the debouncer and the channel the health goes out on.
pub(crate) struct HealthTracker {
    sources: Vec<Box<dyn HealthSource>>,
    debouncer: Debouncer,
    sender: watch::Sender<HealthMap>,
    metrics: NodeMetrics,
}

/// The health sources of `devices`; `wake` is notified by event sources (NVML) when an event
/// arrived, so the agent takes it without waiting for the next round.
pub(crate) fn sources_for(
    devices: &DeviceSource,
    roots: &DiscoveryRoots,
    wake: &Arc<Notify>,
) -> Vec<Box<dyn HealthSource>> {
    match devices {
        DeviceSource::File(path) => vec![Box::new(FileHealth::new(path))],
        DeviceSource::Sysfs => vec![Box::new(AerHealth::new(&roots.sysfs))],
        DeviceSource::Nvml(_) => {
            let mut sources: Vec<Box<dyn HealthSource>> =
                vec![Box::new(AerHealth::new(&roots.sysfs))];
            match nvml_events(wake) {
                Ok(events) => sources.push(events),
                Err(error) => {
                    warn!(%error, "Cannot watch NVML events; GPU health comes from sysfs alone");
                }
            }
            sources
        }
    }
}

#[cfg(feature = "nvml")]
fn nvml_events(
    wake: &Arc<Notify>,
) -> Result<Box<dyn HealthSource>, crate::discovery::DiscoveryError> {
    crate::health::xid::start(Arc::clone(wake)).map(|s| Box::new(s) as Box<dyn HealthSource>)
}

#[cfg(not(feature = "nvml"))]
fn nvml_events(
    _wake: &Arc<Notify>,
) -> Result<Box<dyn HealthSource>, crate::discovery::DiscoveryError> {
    Err(crate::discovery::DiscoveryError::NvmlNotBuilt)
}

impl HealthTracker {
    /// The tracker over `sources` with its first round already taken on `inventory`.
    pub(crate) fn start(
        sources: Vec<Box<dyn HealthSource>>,
        config: HealthConfig,
        inventory: &Inventory,
        metrics: NodeMetrics,
    ) -> Self {
        let mut tracker = HealthTracker {
            sources,
            debouncer: Debouncer::new(config.settle),
            sender: watch::channel(HealthMap::new()).0,
            metrics,
        };
        tracker.round(inventory);
        tracker
    }

    /// The published health.
    pub(super) fn subscribe(&self) -> watch::Receiver<HealthMap> {
        self.sender.subscribe()
    }

    /// The health published now.
    pub(crate) fn current(&self) -> HealthMap {
        self.debouncer.current().clone()
    }

    /// One round over `inventory`: every source asked, the changes logged and counted, the
    /// health sent where it changed. Returns the changes.
    pub(crate) fn round(&mut self, inventory: &Inventory) -> Vec<HealthChange> {
        let observed = observe_all(&mut self.sources, inventory);
        let changes = self
            .debouncer
            .apply(inventory.keys(), &observed, Instant::now(), Utc::now());
        for change in &changes {
            let reason = change
                .to
                .reason
                .map(crate::health::Reason::as_str)
                .unwrap_or_default();
            let message = change.to.message.as_deref().unwrap_or_default();
            if change.to.state == HealthState::Healthy {
                info!(device = %change.device, from = %change.from, "The device is healthy again");
            } else {
                warn!(device = %change.device, from = %change.from, to = %change.to.state, reason, message, "The device's health changed");
            }
            self.metrics.health_changed(change.to.state);
        }
        let current = self.debouncer.current();
        self.metrics
            .set_unhealthy(current.values().filter(|h| h.is_unhealthy()).count());
        self.sender.send_if_modified(|published| {
            if published == current {
                false
            } else {
                published.clone_from(current);
                true
            }
        });
        changes
    }
}
