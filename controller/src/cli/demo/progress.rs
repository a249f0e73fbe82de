//! The demo's progress: counts of pods by phase (read from the simulated API server's store, in
//! process), of claims and devices (read from the ledger) and of the claims prepared by the node
//! agents (their CDI specs), formatted as one line.

use std::collections::BTreeSet;
use std::time::Duration;

use dra_allocator::ledger::Ledger;
use dra_sim::server::StoreReader;
use k8s_openapi::api::core::v1::Pod;

use super::setup::NAMESPACE;

/// One observation of the demo.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    /// Time since the workload started.
    pub elapsed: Duration,
    /// Pods not submitted yet.
    pub to_submit: usize,
    /// Pods submitted and not running yet.
    pub pending: usize,
    /// Pods running.
    pub running: usize,
    /// Pods finished successfully.
    pub succeeded: usize,
    /// Pods failed.
    pub failed: usize,
    /// Claims with an allocation in the ledger now.
    pub claims_allocated: u64,
    /// Claims allocated since start.
    pub claims_allocated_total: u64,
    /// Devices in the ledger.
    pub devices_total: u64,
    /// Devices with at least one consumer.
    pub devices_in_use: u64,
    /// Allocations not yet seen in the cluster.
    pub intents_pending: u64,
    /// The node agents' CDI specs, when the demo runs agents.
    pub cdi: Option<CdiCounts>,
}

/// The CDI specs of the node agents: one per prepared claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CdiCounts {
    /// Specs on the nodes now (claims prepared).
    pub present: usize,
    /// Specs seen appearing since start.
    pub written: usize,
    /// Specs seen disappearing since start.
    pub removed: usize,
}

/// A CDI spec as (node, claim UID).
pub type Spec = (String, String);

/// Follows the set of CDI specs (node, claim UID) from one observation to the next.
#[derive(Debug, Default)]
pub struct CdiTracker {
    seen: BTreeSet<Spec>,
    counts: CdiCounts,
}

impl CdiTracker {
    /// Takes the specs present now; returns those written and those removed since the last call.
    pub fn update(&mut self, now: BTreeSet<Spec>) -> (Vec<Spec>, Vec<Spec>) {
        let written: Vec<_> = now.difference(&self.seen).cloned().collect();
        let removed: Vec<_> = self.seen.difference(&now).cloned().collect();
        self.counts.written += written.len();
        self.counts.removed += removed.len();
        self.counts.present = now.len();
        self.seen = now;
        (written, removed)
    }

    /// The counts so far.
    pub fn counts(&self) -> CdiCounts {
        self.counts
    }
}

impl Snapshot {
    /// Pods submitted and not finished.
    pub fn unfinished(&self) -> usize {
        self.pending + self.running
    }

    /// Percentage of devices in use.
    pub fn utilisation(&self) -> f64 {
        if self.devices_total == 0 {
            0.0
        } else {
            self.devices_in_use as f64 * 100.0 / self.devices_total as f64
        }
    }

    /// The progress line.
    pub fn line(&self) -> String {
        let failed = if self.failed > 0 {
            format!(", {} failed", self.failed)
        } else {
            String::new()
        };
        format!(
            "[{:>5.1}s] pods: {} pending, {} running, {} succeeded{failed}, {} to submit | claims: {} allocated now, {} in total | devices: {}/{} in use ({:.1}%)",
            self.elapsed.as_secs_f64(),
            self.pending,
            self.running,
            self.succeeded,
            self.to_submit,
            self.claims_allocated,
            self.claims_allocated_total,
            self.devices_in_use,
            self.devices_total,
            self.utilisation(),
        ) + &self.cdi.map_or_else(String::new, |cdi| {
            format!(
                " | prepared on nodes: {} ({} CDI specs written, {} removed)",
                cdi.present, cdi.written, cdi.removed
            )
        })
    }
}

/// Counts pods by phase; a pod without a phase is pending.
pub fn count_pods(store: &StoreReader, snapshot: &mut Snapshot) -> anyhow::Result<()> {
    let pods: Vec<Pod> = store.list_typed(Some(NAMESPACE))?;
    let (mut pending, mut running, mut succeeded, mut failed) = (0, 0, 0, 0);
    for pod in &pods {
        match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Running") => running += 1,
            Some("Succeeded") => succeeded += 1,
            Some("Failed") => failed += 1,
            _ => pending += 1,
        }
    }
    snapshot.pending = pending;
    snapshot.running = running;
    snapshot.succeeded = succeeded;
    snapshot.failed = failed;
    Ok(())
}

/// Reads claim and device counts from the ledger (a read snapshot; never waits for writes).
pub async fn count_ledger(ledger: &Ledger, snapshot: &mut Snapshot) -> anyhow::Result<()> {
    let ledger = ledger.clone();
    let utilisation = tokio::task::spawn_blocking(move || ledger.utilisation()).await??;
    snapshot.claims_allocated = utilisation.claims_allocated;
    snapshot.devices_total = utilisation.totals.total;
    snapshot.devices_in_use = utilisation.totals.allocated;
    snapshot.intents_pending = utilisation.intents_pending;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_pods_claims_and_utilisation() {
        let snapshot = Snapshot {
            elapsed: Duration::from_millis(12_340),
            to_submit: 40,
            pending: 10,
            running: 30,
            succeeded: 120,
            claims_allocated: 45,
            claims_allocated_total: 210,
            devices_total: 64,
            devices_in_use: 48,
            ..Snapshot::default()
        };
        assert_eq!(
            snapshot.line(),
            "[ 12.3s] pods: 10 pending, 30 running, 120 succeeded, 40 to submit | claims: 45 allocated now, 210 in total | devices: 48/64 in use (75.0%)"
        );
        assert_eq!(snapshot.unfinished(), 40);
    }

    #[test]
    fn line_shows_the_prepared_claims_when_agents_run() {
        let snapshot = Snapshot {
            cdi: Some(CdiCounts {
                present: 3,
                written: 10,
                removed: 7,
            }),
            ..Snapshot::default()
        };
        assert!(
            snapshot
                .line()
                .ends_with("| prepared on nodes: 3 (10 CDI specs written, 7 removed)"),
            "{}",
            snapshot.line()
        );
    }

    #[test]
    fn tracker_counts_specs_written_and_removed_between_observations() {
        let spec = |node: &str, uid: &str| (node.to_owned(), uid.to_owned());
        let mut tracker = CdiTracker::default();
        let (written, removed) = tracker.update([spec("n0", "a"), spec("n1", "b")].into());
        assert_eq!((written.len(), removed.len()), (2, 0));
        let (written, removed) = tracker.update([spec("n1", "b"), spec("n0", "c")].into());
        assert_eq!(written, [spec("n0", "c")]);
        assert_eq!(removed, [spec("n0", "a")]);
        assert_eq!(
            tracker.counts(),
            CdiCounts {
                present: 2,
                written: 3,
                removed: 1
            }
        );
    }

    #[test]
    fn utilisation_of_an_empty_inventory_is_zero() {
        assert!(Snapshot::default().utilisation().abs() < f64::EPSILON);
    }
}
