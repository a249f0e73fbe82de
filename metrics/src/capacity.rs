//! The capacity gauges of partitions and shared GPUs, by model: whole-GPU equivalents allocated
//! and published, and each capacity (`memory` in bytes, `compute`, `compute-slices`) allocated
//! and published, refreshed on each scrape from the capacity view the `resource.k8s.io/v1`
//! mirror publishes. Without such a view (no partitions or shared GPUs) they have no series.
//!
//! Cardinality: models are bounded by the hardware catalogue and capacity names by what the
//! driver publishes; both are capped at [`MAX_ATTRIBUTE_VALUES`](crate::MAX_ATTRIBUTE_VALUES)
//! (the models, and the names per model, past the cap are left out). Series of models or names
//! that are gone are removed on the next refresh.
//!
//! Depends only on the pure capacity model of `dra-allocator`.

use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::capacity::Utilisation;
use prometheus::{GaugeVec, Opts};

use crate::{Result, MAX_ATTRIBUTE_VALUES, PREFIX};

/// The full names of the capacity gauges. They have series only where a node has partitions or
/// shared GPUs, so they are apart from [`METRIC_NAMES`](crate::METRIC_NAMES), every one of
/// which any process exposes.
pub const CAPACITY_METRIC_NAMES: [&str; 4] = [
    "dra_ledger_device_equivalents_allocated",
    "dra_ledger_device_equivalents_published",
    "dra_ledger_capacity_allocated",
    "dra_ledger_capacity_published",
];

/// See the module doc.
#[derive(Clone)]
pub(crate) struct Capacity {
    pub(crate) equivalents_allocated: GaugeVec,
    pub(crate) equivalents_published: GaugeVec,
    pub(crate) allocated: GaugeVec,
    pub(crate) published: GaugeVec,
}

impl Capacity {
    pub(crate) fn new() -> Result<Self> {
        let vec = |suffix: &str, help: &str, labels: &[&str]| {
            GaugeVec::new(Opts::new(format!("{PREFIX}{suffix}"), help), labels)
        };
        Ok(Capacity {
            equivalents_allocated: vec(
                "device_equivalents_allocated",
                "Whole-GPU equivalents allocated on GPUs with partitions or shares, by model (each GPU counts the fractions its partitions or shares take, at most one)",
                &["model"],
            )?,
            equivalents_published: vec(
                "device_equivalents_published",
                "GPUs with partitions or shares, by model",
                &["model"],
            )?,
            allocated: vec(
                "capacity_allocated",
                "Capacity allocated on GPUs with partitions or shares, by model and capacity name, in the capacity's base unit (bytes for memory)",
                &["model", "capacity"],
            )?,
            published: vec(
                "capacity_published",
                "Capacity of GPUs with partitions or shares, by model and capacity name, in the capacity's base unit (bytes for memory)",
                &["model", "capacity"],
            )?,
        })
    }

    /// Sets the gauges from the utilisation per model, leaving out the capacity names in
    /// `hidden` (placement counters); models and names no longer listed lose their series.
    pub(crate) fn set(&self, by_model: &BTreeMap<String, Utilisation>, hidden: &BTreeSet<String>) {
        for vec in [
            &self.equivalents_allocated,
            &self.equivalents_published,
            &self.allocated,
            &self.published,
        ] {
            vec.reset();
        }
        for (model, usage) in by_model.iter().take(MAX_ATTRIBUTE_VALUES) {
            #[allow(clippy::cast_precision_loss)] // GPU counts stay far below 2^52
            let units = usage.units as f64;
            self.equivalents_allocated
                .with_label_values(&[model.as_str()])
                .set(usage.equivalents_shown());
            self.equivalents_published
                .with_label_values(&[model.as_str()])
                .set(units);
            let shown = usage
                .capacity
                .iter()
                .filter(|(name, _)| !hidden.contains(*name))
                .take(MAX_ATTRIBUTE_VALUES);
            for (name, used) in shown {
                let labels = [model.as_str(), name.as_str()];
                self.allocated
                    .with_label_values(&labels)
                    .set(base_units(used.allocated.milli()));
                self.published
                    .with_label_values(&labels)
                    .set(base_units(used.total.milli()));
            }
        }
    }
}

/// A quantity in milli-units as a float of base units.
fn base_units(milli: i128) -> f64 {
    // Quantities are below 2^63 units: the nearest f64 is close enough for a gauge.
    #[allow(clippy::cast_precision_loss)]
    let value = milli as f64 / 1000.0;
    value
}
