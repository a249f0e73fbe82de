//! The device gauges broken down by node and by attribute value, refreshed from the ledger's
//! read views on each scrape.
//!
//! Cardinality: these are the only metrics whose label values are not from a fixed set. Node
//! names are bounded by the size of the cluster (as in kube-state-metrics), so
//! `node_devices{node,state}` has at most five series per node. Attribute values are bounded
//! by the hardware catalogue for attributes that describe a kind of device (`model`,
//! `memory`), but not for per-device identifiers (a serial number or UUID); so an attribute is
//! exported in `attribute_devices{attribute,value,state}` only while it has at most
//! [`MAX_ATTRIBUTE_VALUES`] distinct values across the whole inventory, and disappears from the
//! metric when it has more. A series whose node or value left the ledger is removed on the
//! next refresh, so the breakdown never shows devices that are gone.
//!
//! Depends only on the ledger's read views (`Utilisation`, `NodeSummary`).

use std::collections::BTreeSet;
use std::sync::Mutex;

use dra_allocator::ledger::{DeviceCounts, NodeSummary, Utilisation};
use prometheus::{IntGaugeVec, Opts};

use super::labels::DEVICE_STATES;
use super::name;
use crate::Result;

/// The most distinct values an attribute may have to be broken down in `attribute_devices`.
pub const MAX_ATTRIBUTE_VALUES: usize = 16;

/// The per-node and per-attribute device gauges and the label sets they show now.
pub(super) struct Breakdown {
    pub(super) node_devices: IntGaugeVec,
    pub(super) attribute_devices: IntGaugeVec,
    /// Label sets (without the state) currently shown, to remove the ones that vanish.
    shown_nodes: Mutex<BTreeSet<String>>,
    shown_attributes: Mutex<BTreeSet<(String, String)>>,
}

fn counts_by_state(counts: &DeviceCounts) -> [(&'static str, u64); 5] {
    let values = [
        counts.free,
        counts.allocated,
        counts.shared,
        counts.cordoned,
        counts.missing,
    ];
    let mut out = [("", 0); 5];
    for (slot, (state, value)) in out.iter_mut().zip(DEVICE_STATES.iter().zip(values)) {
        *slot = (state, value);
    }
    out
}

impl Breakdown {
    pub(super) fn new() -> Result<Self> {
        Ok(Breakdown {
            node_devices: IntGaugeVec::new(
                Opts::new(
                    name("node_devices"),
                    "Devices in the ledger by node and state",
                ),
                &["node", "state"],
            )?,
            attribute_devices: IntGaugeVec::new(
                Opts::new(
                    name("attribute_devices"),
                    "Devices in the ledger by attribute value and state, for attributes with few distinct values",
                ),
                &["attribute", "value", "state"],
            )?,
            shown_nodes: Mutex::new(BTreeSet::new()),
            shown_attributes: Mutex::new(BTreeSet::new()),
        })
    }

    /// Sets the per-node series from `nodes` and removes those of nodes no longer listed.
    pub(super) fn set_nodes(&self, nodes: &[NodeSummary]) {
        let mut shown = self
            .shown_nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut now = BTreeSet::new();
        for summary in nodes {
            for (state, value) in counts_by_state(&summary.counts) {
                self.node_devices
                    .with_label_values(&[summary.node.as_str(), state])
                    .set(super::gauge(value));
            }
            now.insert(summary.node.clone());
        }
        for gone in shown.difference(&now) {
            for state in DEVICE_STATES {
                // The series may not exist; removing a missing one is not an error worth noting.
                let _ = self
                    .node_devices
                    .remove_label_values(&[gone.as_str(), state]);
            }
        }
        *shown = now;
    }

    /// Sets the per-attribute series from `utilisation` and removes those no longer present.
    pub(super) fn set_attributes(&self, utilisation: &Utilisation) {
        let mut shown = self
            .shown_attributes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut now = BTreeSet::new();
        for (attribute, values) in &utilisation.by_attribute {
            if values.len() > MAX_ATTRIBUTE_VALUES {
                continue;
            }
            for (value, counts) in values {
                for (state, count) in counts_by_state(counts) {
                    self.attribute_devices
                        .with_label_values(&[attribute.as_str(), value.as_str(), state])
                        .set(super::gauge(count));
                }
                now.insert((attribute.clone(), value.clone()));
            }
        }
        for (attribute, value) in shown.difference(&now) {
            for state in DEVICE_STATES {
                let _ = self.attribute_devices.remove_label_values(&[
                    attribute.as_str(),
                    value.as_str(),
                    state,
                ]);
            }
        }
        *shown = now;
    }
}
