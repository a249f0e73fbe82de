//! `dra-metrics`: every Prometheus metric of dra-ledger, defined in this one crate, and the fixed
//! label sets they use.
//!
//! [`Metrics`] owns its own [`Registry`]; all names carry the `dra_ledger_` prefix and every
//! label value comes from a fixed set (the enums of [`labels`](AllocationMode), or an HTTP status
//! code), with one deliberate exception: the breakdown gauges `node_devices{node,state}` and
//! `attribute_devices{attribute,value,state}` carry node names and attribute values, which are
//! bounded by the cluster size and the hardware catalogue rather than by a list in the code
//! (see the `breakdown` module for the bounds). Counters and histograms are recorded by the
//! driver (through its observer), the ledger's commit hook and the Kubernetes client layer;
//! gauges are refreshed from the ledger's read views and the readiness flags at scrape time,
//! and the admin API (`dra-api`) only encodes them on `GET /metrics`.
//!
//! Beyond the thirteen core metrics ([`CORE_METRIC_NAMES`]: allocations, deallocations and their
//! latencies, ledger commits, device and claim counts, pending intents, reconcile drift, the work
//! queue, Kubernetes API requests, build info) the crate defines the breakdown gauges, `ready`
//! (0 or 1, what `/readyz` answers), `leader` (0 on a standby),
//! `oldest_pending_intent_age_seconds` and `idle_allocated_devices` (by `idle_for`), which the
//! dashboards and alert rules use, and the capacity gauges of partitions and shared GPUs by model
//! ([`CAPACITY_METRIC_NAMES`]), which have series only where such GPUs are published.
//!
//! Depends on the ledger's read views and commit statistics (`dra-allocator`) and on prometheus;
//! must not depend on the driver, the controller, the admin API or the Kubernetes client.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dra_allocator::ledger::{CommitHook, CommitSample, Ledger, NodeSummary, Utilisation};
use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

mod apart;
mod breakdown;
mod capacity;
mod error;
mod idle;
mod labels;

pub use error::{Error, Result};

pub use breakdown::MAX_ATTRIBUTE_VALUES;
pub use capacity::CAPACITY_METRIC_NAMES;

pub use apart::HEALTH_VALUES;
pub use idle::IDLE_FOR;
pub use labels::{
    AllocationMode, AllocationOutcome, DeallocationOutcome, DriftKind, API_VERBS, DEVICE_STATES,
};

/// The prefix of every metric name.
pub const PREFIX: &str = "dra_ledger_";

/// The full names of the core metrics: allocations, ledger commits, devices and claims, intents,
/// reconcile drift, the work queue, Kubernetes API requests and build info.
pub const CORE_METRIC_NAMES: [&str; 13] = [
    "dra_ledger_allocations_total",
    "dra_ledger_deallocations_total",
    "dra_ledger_allocate_duration_seconds",
    "dra_ledger_unsuitable_nodes_duration_seconds",
    "dra_ledger_ledger_commit_duration_seconds",
    "dra_ledger_ledger_commit_batch_size",
    "dra_ledger_devices",
    "dra_ledger_claims_allocated",
    "dra_ledger_intents_pending",
    "dra_ledger_reconcile_drift_total",
    "dra_ledger_workqueue_depth",
    "dra_ledger_api_requests_total",
    "dra_ledger_build_info",
];

/// The full names of the breakdown and operational gauges, beyond the core metrics.
const GAUGE_NAMES: [&str; 9] = [
    "dra_ledger_node_devices",
    "dra_ledger_attribute_devices",
    "dra_ledger_ready",
    "dra_ledger_leader",
    "dra_ledger_oldest_pending_intent_age_seconds",
    "dra_ledger_admin_access_claims",
    "dra_ledger_unhealthy_devices",
    "dra_ledger_device_health_changes_total",
    "dra_ledger_idle_allocated_devices",
];

/// The full names of all metrics, as exposed on `/metrics`: the core metrics, then the
/// breakdown and operational gauges.
pub const METRIC_NAMES: [&str; 22] = concat_names(CORE_METRIC_NAMES, GAUGE_NAMES);

/// `first` followed by `then` (`N` must be their total length, checked at compile time).
const fn concat_names<const A: usize, const B: usize, const N: usize>(
    first: [&'static str; A],
    then: [&'static str; B],
) -> [&'static str; N] {
    assert!(A + B == N, "N must be the total length");
    let mut names = [""; N];
    let mut i = 0;
    while i < A {
        names[i] = first[i];
        i += 1;
    }
    while i < N {
        names[i] = then[i - A];
        i += 1;
    }
    names
}

/// The registry and every metric of the process. Cheap to share behind an `Arc`.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    allocations: IntCounterVec,
    deallocations: IntCounterVec,
    allocate_duration: Histogram,
    unsuitable_nodes_duration: Histogram,
    commit_duration: Histogram,
    commit_batch_size: Histogram,
    devices: IntGaugeVec,
    claims_allocated: IntGauge,
    intents_pending: IntGauge,
    drift: IntCounterVec,
    workqueue_depth: IntGauge,
    api_requests: IntCounterVec,
    build_info: IntGaugeVec,
    breakdown: Arc<breakdown::Breakdown>,
    ready: IntGauge,
    leader: IntGauge,
    oldest_intent_age: Gauge,
    apart: apart::Apart,
    idle: idle::Idle,
    capacity: capacity::Capacity,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn name(suffix: &str) -> String {
    format!("{PREFIX}{suffix}")
}

fn histogram(suffix: &str, help: &str, buckets: Vec<f64>) -> Result<Histogram> {
    Ok(Histogram::with_opts(
        HistogramOpts::new(name(suffix), help).buckets(buckets),
    )?)
}

/// Latency buckets from 100 µs to about 13 s.
fn latency_buckets() -> Result<Vec<f64>> {
    Ok(prometheus::exponential_buckets(0.000_1, 2.0, 18)?)
}

impl Metrics {
    /// Creates every metric in a fresh registry, with `build_info{version}` set to 1 and all
    /// fixed label combinations present at 0.
    pub fn new(version: &str) -> Result<Self> {
        let metrics = Metrics {
            registry: Registry::new(),
            allocations: IntCounterVec::new(
                Opts::new(
                    name("allocations_total"),
                    "Allocate calls by mode and outcome",
                ),
                &["mode", "outcome"],
            )?,
            deallocations: IntCounterVec::new(
                Opts::new(name("deallocations_total"), "Deallocate calls by outcome"),
                &["outcome"],
            )?,
            allocate_duration: histogram(
                "allocate_duration_seconds",
                "Duration of one Allocate call of the driver, including the durable commit",
                latency_buckets()?,
            )?,
            unsuitable_nodes_duration: histogram(
                "unsuitable_nodes_duration_seconds",
                "Duration of one UnsuitableNodes call of the driver",
                latency_buckets()?,
            )?,
            commit_duration: histogram(
                "ledger_commit_duration_seconds",
                "Duration of one durable ledger commit",
                latency_buckets()?,
            )?,
            commit_batch_size: histogram(
                "ledger_commit_batch_size",
                "Operations carried by one ledger commit",
                prometheus::exponential_buckets(1.0, 2.0, 10)?,
            )?,
            devices: IntGaugeVec::new(
                Opts::new(
                    name("devices"),
                    "Devices in the ledger by state (free: in service without consumers; allocated: with consumers)",
                ),
                &["state"],
            )?,
            claims_allocated: IntGauge::new(
                name("claims_allocated"),
                "Claims with an allocation in the ledger",
            )?,
            intents_pending: IntGauge::new(
                name("intents_pending"),
                "Allocations durable in the ledger but not yet seen in the cluster",
            )?,
            drift: IntCounterVec::new(
                Opts::new(
                    name("reconcile_drift_total"),
                    "Differences between ledger and cluster repaired by reconciles, by kind",
                ),
                &["kind"],
            )?,
            workqueue_depth: IntGauge::new(
                name("workqueue_depth"),
                "Keys waiting in the controller's work queue",
            )?,
            api_requests: IntCounterVec::new(
                Opts::new(
                    name("api_requests_total"),
                    "Requests to the Kubernetes API server by verb and HTTP status code",
                ),
                &["verb", "code"],
            )?,
            build_info: IntGaugeVec::new(
                Opts::new(
                    name("build_info"),
                    "Always 1; the version label names the build",
                ),
                &["version"],
            )?,
            breakdown: Arc::new(breakdown::Breakdown::new()?),
            ready: IntGauge::new(
                name("ready"),
                "1 when the process is ready (ledger open, caches synced, initial reconcile done), else 0",
            )?,
            leader: IntGauge::new(
                name("leader"),
                "1 when this process is the active allocator (holds the leader lease, or runs without leader election), 0 on a standby",
            )?,
            oldest_intent_age: Gauge::new(
                name("oldest_pending_intent_age_seconds"),
                "Age of the oldest allocation durable in the ledger but not yet seen in the cluster; 0 when none",
            )?,
            apart: apart::Apart::new()?,
            idle: idle::Idle::new()?,
            capacity: capacity::Capacity::new()?,
        };
        metrics.register_all()?;
        metrics.build_info.with_label_values(&[version]).set(1);
        metrics.create_fixed_series();
        Ok(metrics)
    }

    /// Creates every series with fixed labels at 0, so that rates start from a known value.
    fn create_fixed_series(&self) {
        let metrics = self;
        for mode in AllocationMode::ALL {
            for outcome in AllocationOutcome::ALL {
                // Only the mirror records admin access.
                if outcome == AllocationOutcome::AdminAccess && mode != AllocationMode::Mirrored {
                    continue;
                }
                metrics
                    .allocations
                    .with_label_values(&[mode.as_str(), outcome.as_str()]);
            }
        }
        for outcome in DeallocationOutcome::ALL {
            metrics.deallocations.with_label_values(&[outcome.as_str()]);
        }
        for state in DEVICE_STATES {
            metrics.devices.with_label_values(&[state]);
        }
        for kind in DriftKind::ALL {
            metrics.drift.with_label_values(&[kind.as_str()]);
        }
    }

    fn register_all(&self) -> Result<()> {
        let collectors: [Box<dyn prometheus::core::Collector>; 26] = [
            Box::new(self.allocations.clone()),
            Box::new(self.deallocations.clone()),
            Box::new(self.allocate_duration.clone()),
            Box::new(self.unsuitable_nodes_duration.clone()),
            Box::new(self.commit_duration.clone()),
            Box::new(self.commit_batch_size.clone()),
            Box::new(self.devices.clone()),
            Box::new(self.claims_allocated.clone()),
            Box::new(self.intents_pending.clone()),
            Box::new(self.drift.clone()),
            Box::new(self.workqueue_depth.clone()),
            Box::new(self.api_requests.clone()),
            Box::new(self.build_info.clone()),
            Box::new(self.breakdown.node_devices.clone()),
            Box::new(self.breakdown.attribute_devices.clone()),
            Box::new(self.ready.clone()),
            Box::new(self.leader.clone()),
            Box::new(self.oldest_intent_age.clone()),
            Box::new(self.apart.admin_access_claims.clone()),
            Box::new(self.apart.unhealthy_devices.clone()),
            Box::new(self.apart.health_changes.clone()),
            Box::new(self.idle.devices.clone()),
            Box::new(self.capacity.equivalents_allocated.clone()),
            Box::new(self.capacity.equivalents_published.clone()),
            Box::new(self.capacity.allocated.clone()),
            Box::new(self.capacity.published.clone()),
        ];
        for collector in collectors {
            self.registry.register(collector)?;
        }
        Ok(())
    }

    /// The registry (for tests and for exporting elsewhere).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Records one `Allocate` call of the driver for `claims` claims: the counter grows by the
    /// number of claims, the histogram observes the call. A `Mirrored` allocation (the v1
    /// mirror recording the kube-scheduler's) counts without a duration.
    pub fn record_allocation(
        &self,
        mode: AllocationMode,
        outcome: AllocationOutcome,
        claims: usize,
        took: Duration,
    ) {
        self.allocations
            .with_label_values(&[mode.as_str(), outcome.as_str()])
            .inc_by(claims as u64);
        // A mirrored allocation is no `Allocate` call: the scheduler made it.
        if mode != AllocationMode::Mirrored {
            self.allocate_duration.observe(took.as_secs_f64());
        }
    }

    /// Records one `Deallocate` call of the driver.
    pub fn record_deallocation(&self, outcome: DeallocationOutcome) {
        self.deallocations
            .with_label_values(&[outcome.as_str()])
            .inc();
    }

    /// Records one `UnsuitableNodes` call of the driver.
    pub fn record_unsuitable_nodes(&self, took: Duration) {
        self.unsuitable_nodes_duration.observe(took.as_secs_f64());
    }

    /// Records `count` repaired differences of one kind.
    pub fn record_drift(&self, kind: DriftKind, count: u64) {
        self.drift.with_label_values(&[kind.as_str()]).inc_by(count);
    }

    /// Records one request to the Kubernetes API server; `verb` outside [`API_VERBS`] counts as
    /// `other`, `code` is the HTTP status (or `error` when no response arrived).
    pub fn record_api_request(&self, verb: &str, code: &str) {
        let verb = API_VERBS
            .iter()
            .find(|known| **known == verb)
            .copied()
            .unwrap_or("other");
        self.api_requests.with_label_values(&[verb, code]).inc();
    }

    /// Sets the work queue depth.
    pub fn set_workqueue_depth(&self, depth: usize) {
        self.workqueue_depth
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Records one durable ledger commit. A commit without a sync (deferred confirmations
    /// alone) is not one: the next durable commit carries it.
    pub fn record_commit(&self, sample: &CommitSample) {
        if !sample.durable {
            return;
        }
        self.commit_duration.observe(sample.duration.as_secs_f64());
        if sample.ok {
            self.commit_batch_size.observe(sample.batch_size as f64);
        }
    }

    /// A hook for `LedgerOptions::on_commit` that records every commit here.
    pub fn commit_hook(self: &Arc<Self>) -> CommitHook {
        let metrics = Arc::clone(self);
        Arc::new(move |sample: &CommitSample| metrics.record_commit(sample))
    }

    /// Sets the `ready` gauge (refreshed from the readiness flags on each scrape).
    pub fn set_ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    /// Sets the `leader` gauge (refreshed from the readiness flags on each scrape).
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Sets the device, claim and intent gauges and the per-attribute breakdown from a
    /// utilisation view.
    pub fn set_utilisation(&self, utilisation: &Utilisation) {
        let totals = &utilisation.totals;
        let values = [
            totals.free,
            totals.allocated,
            totals.shared,
            totals.cordoned,
            totals.missing,
        ];
        for (state, value) in DEVICE_STATES.iter().zip(values) {
            self.devices.with_label_values(&[state]).set(gauge(value));
        }
        self.claims_allocated
            .set(gauge(utilisation.claims_allocated));
        self.intents_pending.set(gauge(utilisation.intents_pending));
        self.breakdown.set_attributes(utilisation);
    }

    /// Sets the per-node breakdown, the admin-access and the unhealthy-device gauges from the
    /// ledger's node summaries; nodes not listed lose their series.
    pub fn set_nodes(&self, nodes: &[NodeSummary]) {
        self.breakdown.set_nodes(nodes);
        self.apart.set_nodes(nodes);
    }

    /// Sets `idle_allocated_devices` from `(idle seconds, devices)` of every idle claim.
    pub fn set_idle(&self, claims: &[(u64, usize)]) {
        self.idle.set(claims);
    }

    /// Sets the capacity gauges of partitions and shared GPUs from their utilisation per model,
    /// leaving out the capacity names in `hidden` (counters that only mark where a partition
    /// sits); models and names not listed lose their series.
    pub fn set_capacity(
        &self,
        by_model: &std::collections::BTreeMap<String, dra_allocator::capacity::Utilisation>,
        hidden: &std::collections::BTreeSet<String>,
    ) {
        self.capacity.set(by_model, hidden);
    }

    /// Records one device health change on `node`, to unhealthy or back to healthy.
    pub fn record_health_change(&self, node: &str, unhealthy: bool) {
        self.apart.record_health_change(node, unhealthy);
    }

    /// Sets the age of the oldest pending intent from its creation time (Unix milliseconds),
    /// or 0 when `oldest_created_ms` is `None`.
    pub fn set_oldest_intent(&self, oldest_created_ms: Option<u64>, now_ms: u64) {
        let age_ms = oldest_created_ms.map_or(0, |created| now_ms.saturating_sub(created));
        #[allow(clippy::cast_precision_loss)] // ages in ms stay far below 2^52
        self.oldest_intent_age.set(age_ms as f64 / 1000.0);
    }

    /// Refreshes the gauges from the ledger's read view (blocking; does not wait for the writer).
    pub fn refresh_from_ledger(&self, ledger: &Ledger) -> Result<()> {
        let (utilisation, nodes) = ledger.utilisation_and_nodes().map_err(Error::Ledger)?;
        self.set_utilisation(&utilisation);
        self.set_nodes(&nodes);
        let oldest = ledger
            .pending_intents()
            .map_err(Error::Ledger)?
            .iter()
            .map(|intent| intent.created_ms)
            .min();
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            });
        self.set_oldest_intent(oldest, now_ms);
        Ok(())
    }

    /// The current values in the Prometheus text format.
    pub fn encode(&self) -> Result<String> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        String::from_utf8(buffer).map_err(Error::Encode)
    }
}

fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The content type of [`Metrics::encode`].
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::{CommitSample, Metrics};
    use std::time::Duration;

    #[test]
    fn only_durable_commits_are_observed() {
        let metrics = Metrics::new("test").unwrap();
        let sample = |batch_size, durable| CommitSample {
            batch_size,
            duration: Duration::from_millis(2),
            ok: true,
            durable,
        };
        metrics.record_commit(&sample(3, true));
        metrics.record_commit(&sample(5, false));
        assert_eq!(metrics.commit_duration.get_sample_count(), 1);
        assert_eq!(metrics.commit_batch_size.get_sample_count(), 1);
        assert!((metrics.commit_batch_size.get_sample_sum() - 3.0).abs() < f64::EPSILON);
    }
}
