//! The driver's [`DriverObserver`] recording into the Prometheus registry of `dra-metrics`. Also
//! keeps the running total of allocated claims that the demo prints.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dra_metrics::Metrics;

use crate::driver::{
    AllocationMode, AllocationOutcome, DeallocationOutcome, DriftKind, DriverObserver,
};

/// Records the driver's facts in [`Metrics`].
#[derive(Debug)]
pub struct MetricsObserver {
    metrics: Arc<Metrics>,
    claims_allocated: AtomicU64,
}

impl MetricsObserver {
    /// An observer recording into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        MetricsObserver {
            metrics,
            claims_allocated: AtomicU64::new(0),
        }
    }

    /// Claims allocated successfully since start (repeats included).
    pub fn claims_allocated(&self) -> u64 {
        self.claims_allocated.load(Ordering::Relaxed)
    }
}

impl DriverObserver for MetricsObserver {
    fn allocation(
        &self,
        mode: AllocationMode,
        outcome: AllocationOutcome,
        claims: usize,
        duration: Duration,
    ) {
        if outcome == AllocationOutcome::Allocated {
            self.claims_allocated
                .fetch_add(claims as u64, Ordering::Relaxed);
        }
        self.metrics
            .record_allocation(mode, outcome, claims, duration);
    }

    fn deallocation(&self, outcome: DeallocationOutcome) {
        self.metrics.record_deallocation(outcome);
    }

    fn unsuitable_nodes(&self, duration: Duration) {
        self.metrics.record_unsuitable_nodes(duration);
    }

    fn drift(&self, kind: DriftKind, count: u64) {
        self.metrics.record_drift(kind, count);
    }

    fn health_change(&self, node: &str, unhealthy: bool) {
        self.metrics.record_health_change(node, unhealthy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_count_claims_and_reach_the_registry() {
        let metrics = Arc::new(Metrics::new("test").unwrap());
        let observer = MetricsObserver::new(metrics.clone());
        observer.allocation(
            AllocationMode::Delayed,
            AllocationOutcome::Allocated,
            2,
            Duration::from_millis(4),
        );
        observer.allocation(
            AllocationMode::Immediate,
            AllocationOutcome::Unsatisfiable,
            1,
            Duration::from_millis(1),
        );
        observer.deallocation(DeallocationOutcome::NotAllocated);
        assert_eq!(observer.claims_allocated(), 2);
        let text = metrics.encode().unwrap();
        for series in [
            "dra_ledger_allocations_total{mode=\"delayed\",outcome=\"allocated\"} 2",
            "dra_ledger_allocations_total{mode=\"immediate\",outcome=\"unsatisfiable\"} 1",
            "dra_ledger_deallocations_total{outcome=\"not_allocated\"} 1",
            "dra_ledger_allocate_duration_seconds_count 2",
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
    }
}
