//! Every Prometheus metric of the node agent, defined in this one module, under the prefix
//! `dra_ledger_node_`: prepare and unprepare calls by outcome, prepare latency, the prepared
//! claims and devices of this node, garbage collection removals by kind, whether the kubelet
//! acknowledged the registration, (v1) the claim device status writes by outcome, the devices
//! unhealthy now and the health changes by the state entered. Label values come from the fixed
//! sets below. The device count
//! is `inventory_devices`: `dra_ledger_node_devices{node,state}` is the controller's gauge of
//! the ledger's devices per node.

use crate::health::HealthState;
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// The prefix of every metric name.
pub const PREFIX: &str = "dra_ledger_node_";

/// The full names of all metrics, as exposed on `/metrics`.
pub const METRIC_NAMES: [&str; 10] = [
    "dra_ledger_node_prepare_total",
    "dra_ledger_node_unprepare_total",
    "dra_ledger_node_prepare_duration_seconds",
    "dra_ledger_node_prepared_claims",
    "dra_ledger_node_inventory_devices",
    "dra_ledger_node_gc_removed_total",
    "dra_ledger_node_registered",
    "dra_ledger_node_claim_status_writes_total",
    "dra_ledger_node_devices_unhealthy",
    "dra_ledger_node_health_changes_total",
];

/// The outcome of one claim's prepare or unprepare, or of one attempt to write a claim's
/// device status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done (or already done).
    Success,
    /// Refused or failed; a claim's prepare error went to the kubelet, a status write is
    /// retried.
    Error,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Error => "error",
        }
    }
}

/// What garbage collection removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcKind {
    /// A prepared claim whose `ResourceClaim` is gone or no longer allocated to this node.
    Claim,
    /// A CDI file of ours without a journal entry.
    CdiFile,
}

impl GcKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            GcKind::Claim => "claim",
            GcKind::CdiFile => "cdi_file",
        }
    }
}

/// The `state` label of a health change: `healthy`, `unhealthy` or `unknown`.
fn state_label(state: HealthState) -> &'static str {
    match state {
        HealthState::Healthy => "healthy",
        HealthState::Unhealthy => "unhealthy",
        HealthState::Unknown => "unknown",
    }
}

/// The media type of the text exposition format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4";

/// The registry and every metric of the agent. Clones share them.
#[derive(Clone, Debug)]
pub struct NodeMetrics {
    registry: Registry,
    prepare: IntCounterVec,
    unprepare: IntCounterVec,
    prepare_duration: Histogram,
    prepared_claims: IntGauge,
    devices: IntGauge,
    gc_removed: IntCounterVec,
    registered: IntGauge,
    status_writes: IntCounterVec,
    unhealthy: IntGauge,
    health_changes: IntCounterVec,
}

fn name(suffix: &str) -> String {
    format!("{PREFIX}{suffix}")
}

impl NodeMetrics {
    /// Creates every metric in a fresh registry, with each fixed label value present at 0.
    pub fn new() -> prometheus::Result<Self> {
        let outcome = |suffix: &str, help: &str| {
            IntCounterVec::new(Opts::new(name(suffix), help), &["outcome"])
        };
        let metrics = NodeMetrics {
            registry: Registry::new(),
            prepare: outcome("prepare_total", "Claims prepared by outcome")?,
            unprepare: outcome("unprepare_total", "Claims unprepared by outcome")?,
            prepare_duration: Histogram::with_opts(
                HistogramOpts::new(
                    name("prepare_duration_seconds"),
                    "Duration of a NodePrepareResources batch, journal and CDI writes included",
                )
                .buckets(prometheus::exponential_buckets(0.000_1, 2.0, 18)?),
            )?,
            prepared_claims: IntGauge::new(
                name("prepared_claims"),
                "Claims prepared on this node",
            )?,
            devices: IntGauge::new(
                name("inventory_devices"),
                "Devices in this node's inventory",
            )?,
            gc_removed: IntCounterVec::new(
                Opts::new(
                    name("gc_removed_total"),
                    "What garbage collection removed, by kind",
                ),
                &["kind"],
            )?,
            registered: IntGauge::new(
                name("registered"),
                "1 once the kubelet acknowledged the plugin's registration, else 0",
            )?,
            status_writes: outcome(
                "claim_status_writes_total",
                "Writes of a prepared or unprepared claim's device status by outcome",
            )?,
            unhealthy: IntGauge::new(
                name("devices_unhealthy"),
                "Devices of this node that are unhealthy now (tainted, or withheld from the inventory)",
            )?,
            health_changes: IntCounterVec::new(
                Opts::new(
                    name("health_changes_total"),
                    "Changes of a device's health, by the state entered",
                ),
                &["state"],
            )?,
        };
        let r = &metrics.registry;
        r.register(Box::new(metrics.prepare.clone()))?;
        r.register(Box::new(metrics.unprepare.clone()))?;
        r.register(Box::new(metrics.prepare_duration.clone()))?;
        r.register(Box::new(metrics.prepared_claims.clone()))?;
        r.register(Box::new(metrics.devices.clone()))?;
        r.register(Box::new(metrics.gc_removed.clone()))?;
        r.register(Box::new(metrics.registered.clone()))?;
        r.register(Box::new(metrics.status_writes.clone()))?;
        r.register(Box::new(metrics.unhealthy.clone()))?;
        r.register(Box::new(metrics.health_changes.clone()))?;
        for state in [
            HealthState::Healthy,
            HealthState::Unhealthy,
            HealthState::Unknown,
        ] {
            metrics
                .health_changes
                .with_label_values(&[state_label(state)]);
        }
        for outcome in [Outcome::Success, Outcome::Error] {
            metrics.prepare.with_label_values(&[outcome.as_str()]);
            metrics.unprepare.with_label_values(&[outcome.as_str()]);
            metrics.status_writes.with_label_values(&[outcome.as_str()]);
        }
        for kind in [GcKind::Claim, GcKind::CdiFile] {
            metrics.gc_removed.with_label_values(&[kind.as_str()]);
        }
        Ok(metrics)
    }

    /// Counts one claim's prepare.
    pub fn prepared(&self, outcome: Outcome) {
        self.prepare.with_label_values(&[outcome.as_str()]).inc();
    }

    /// Counts one claim's unprepare.
    pub fn unprepared(&self, outcome: Outcome) {
        self.unprepare.with_label_values(&[outcome.as_str()]).inc();
    }

    /// Records the duration of one prepare batch.
    pub fn observe_prepare(&self, seconds: f64) {
        self.prepare_duration.observe(seconds);
    }

    /// Sets the number of prepared claims.
    pub fn set_prepared_claims(&self, count: usize) {
        self.prepared_claims
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets the number of devices in the inventory.
    pub fn set_devices(&self, count: usize) {
        self.devices.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Counts `count` removals of `kind`.
    pub fn gc_removed(&self, kind: GcKind, count: usize) {
        self.gc_removed
            .with_label_values(&[kind.as_str()])
            .inc_by(u64::try_from(count).unwrap_or(u64::MAX));
    }

    /// Sets whether the kubelet acknowledged the registration.
    pub fn set_registered(&self, registered: bool) {
        self.registered.set(i64::from(registered));
    }

    /// Counts one attempt to write a claim's device status.
    pub fn status_written(&self, outcome: Outcome) {
        self.status_writes
            .with_label_values(&[outcome.as_str()])
            .inc();
    }

    /// Sets the number of unhealthy devices.
    pub fn set_unhealthy(&self, count: usize) {
        self.unhealthy.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Counts one change of a device's health into `state`.
    pub fn health_changed(&self, state: HealthState) {
        self.health_changes
            .with_label_values(&[state_label(state)])
            .inc();
    }

    /// Every metric in the text exposition format.
    pub fn encode(&self) -> prometheus::Result<String> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_exposed_with_its_fixed_labels_before_any_work() {
        let metrics = NodeMetrics::new().unwrap();
        let text = metrics.encode().unwrap();
        for name in METRIC_NAMES {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} in\n{text}"
            );
        }
        assert!(text.contains("dra_ledger_node_prepare_total{outcome=\"error\"} 0"));
        assert!(text.contains("dra_ledger_node_gc_removed_total{kind=\"cdi_file\"} 0"));
    }

    #[test]
    fn counts_and_registration_show_in_the_exposition() {
        let metrics = NodeMetrics::new().unwrap();
        metrics.prepared(Outcome::Success);
        metrics.prepared(Outcome::Success);
        metrics.gc_removed(GcKind::Claim, 3);
        metrics.set_prepared_claims(2);
        metrics.set_devices(8);
        metrics.set_registered(true);
        metrics.status_written(Outcome::Error);
        metrics.set_unhealthy(1);
        metrics.health_changed(HealthState::Unhealthy);
        let text = metrics.encode().unwrap();
        assert!(text.contains("dra_ledger_node_devices_unhealthy 1"));
        assert!(text.contains("dra_ledger_node_health_changes_total{state=\"unhealthy\"} 1"));
        assert!(text.contains("dra_ledger_node_health_changes_total{state=\"healthy\"} 0"));
        assert!(text.contains("dra_ledger_node_prepare_total{outcome=\"success\"} 2"));
        assert!(text.contains("dra_ledger_node_gc_removed_total{kind=\"claim\"} 3"));
        assert!(text.contains("dra_ledger_node_prepared_claims 2"));
        assert!(text.contains("dra_ledger_node_inventory_devices 8"));
        assert!(text.contains("dra_ledger_node_registered 1"));
        assert!(text.contains("dra_ledger_node_claim_status_writes_total{outcome=\"error\"} 1"));
    }
}
