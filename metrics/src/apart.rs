//! The ledger's gauges and counters of what no device state counts: admin-access claims, which
//! look at devices and hold none, and device health, reported beside the state. Kept apart so
//! that the states of `dra_ledger_devices` keep summing to the device total.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use dra_allocator::ledger::NodeSummary;
use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts};

use crate::{gauge, Result, PREFIX};

/// The values of the `health` label of `dra_ledger_device_health_changes_total`.
pub const HEALTH_VALUES: [&str; 2] = ["unhealthy", "healthy"];

/// See the module doc.
#[derive(Clone)]
pub(crate) struct Apart {
    pub(crate) admin_access_claims: IntGauge,
    pub(crate) unhealthy_devices: IntGaugeVec,
    pub(crate) health_changes: IntCounterVec,
    /// The nodes with health-change series, so that a node that leaves loses them.
    counted_nodes: Arc<Mutex<BTreeSet<String>>>,
}

impl Apart {
    pub(crate) fn new() -> Result<Self> {
        let health_changes = IntCounterVec::new(
            Opts::new(
                format!("{PREFIX}device_health_changes_total"),
                "Device health changes recorded in the ledger, by the health a device changed to",
            ),
            &["node", "health"],
        )?;
        Ok(Apart {
            admin_access_claims: IntGauge::new(
                format!("{PREFIX}admin_access_claims"),
                "Admin-access claims in the ledger (they look at devices and hold none, so dra_ledger_devices does not count them)",
            )?,
            unhealthy_devices: IntGaugeVec::new(
                Opts::new(
                    format!("{PREFIX}unhealthy_devices"),
                    "Devices in the ledger that their node agent reports unhealthy, by node and whether a claim holds them (each also counted in dra_ledger_devices by its state)",
                ),
                &["node", "allocated"],
            )?,
            health_changes,
            counted_nodes: Arc::default(),
        })
    }
}

impl Apart {
    /// Sets the gauges from the ledger's node summaries and creates each node's health-change
    /// series at 0, so that a comparison with an earlier value sees the first change of a node;
    /// nodes not listed lose their series.
    pub(crate) fn set_nodes(&self, nodes: &[NodeSummary]) {
        let listed: BTreeSet<String> = nodes.iter().map(|n| n.node.clone()).collect();
        let mut counted = self
            .counted_nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for gone in counted.difference(&listed) {
            for health in HEALTH_VALUES {
                // A series never created is fine to miss.
                let _ = self
                    .health_changes
                    .remove_label_values(&[gone.as_str(), health]);
            }
        }
        *counted = listed;
        drop(counted);
        self.admin_access_claims
            .set(gauge(nodes.iter().map(|n| n.admin_access).sum()));
        self.unhealthy_devices.reset();
        for node in nodes {
            let free = node.unhealthy.saturating_sub(node.unhealthy_allocated);
            for (allocated, count) in [("true", node.unhealthy_allocated), ("false", free)] {
                self.unhealthy_devices
                    .with_label_values(&[node.node.as_str(), allocated])
                    .set(gauge(count));
            }
            for health in HEALTH_VALUES {
                self.health_changes
                    .with_label_values(&[node.node.as_str(), health]);
            }
        }
    }

    /// Records one device health change on `node`, to unhealthy or back to healthy.
    pub(crate) fn record_health_change(&self, node: &str, unhealthy: bool) {
        let health = HEALTH_VALUES[usize::from(!unhealthy)];
        self.counted_nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(node.to_owned());
        self.health_changes.with_label_values(&[node, health]).inc();
    }
}
