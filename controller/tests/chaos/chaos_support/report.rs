//! The counters a chaos run prints at the end: kills by mode and by failpoint, recoveries with
//! their time to ready, allocations observed, the ledger's audit counts (intents confirmed,
//! released, aborted, imported) and violations.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Counters of one run.
#[derive(Debug, Default)]
pub struct Report {
    /// Kills by mode: `random`, `failpoint`, `failpoint_timeout` (armed, not reached in time,
    /// killed anyway).
    pub kills: BTreeMap<&'static str, u64>,
    /// Failpoint kills by point.
    pub failpoints: BTreeMap<String, u64>,
    /// Times from spawn to ready of the restarts that reached ready.
    pub recoveries: Vec<Duration>,
    /// Restarts that paused at a failpoint before they were ready.
    pub frozen_before_ready: u64,
    /// Distinct claims seen allocated.
    pub allocations_observed: usize,
    /// The ledger's audit counts at the end.
    pub audit: BTreeMap<&'static str, u64>,
    /// Violations recorded by the watcher and the checks.
    pub violations: u64,
    /// Immediate claims and pods the churn created.
    pub created: (u64, u64),
}

impl Report {
    /// Counts a kill of `mode`.
    pub fn kill(&mut self, mode: &'static str) {
        *self.kills.entry(mode).or_default() += 1;
    }

    /// All kills.
    pub fn total_kills(&self) -> u64 {
        self.kills.values().sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        writeln!(f, "kills: {} {:?}", self.total_kills(), self.kills)?;
        writeln!(f, "kills at failpoints: {:?}", self.failpoints)?;
        if let (Some(min), Some(max)) = (self.recoveries.iter().min(), self.recoveries.iter().max())
        {
            let mean = self.recoveries.iter().sum::<Duration>() / self.recoveries.len() as u32;
            writeln!(
                f,
                "recoveries: {} reached ready (time to ready min {:.0} ms, mean {:.0} ms, max {:.0} ms); {} paused at a failpoint before ready",
                self.recoveries.len(),
                ms(*min),
                ms(mean),
                ms(*max),
                self.frozen_before_ready
            )?;
        }
        writeln!(
            f,
            "workload: {} immediate claims, {} pods created; {} claims seen allocated",
            self.created.0, self.created.1, self.allocations_observed
        )?;
        let get = |k| self.audit.get(k).copied().unwrap_or(0);
        writeln!(
            f,
            "ledger audit: {} allocated, {} confirmed, {} released, {} aborted, {} imported",
            get("allocated"),
            get("confirmed"),
            get("released"),
            get("aborted"),
            get("imported")
        )?;
        write!(f, "violations: {}", self.violations)
    }
}
