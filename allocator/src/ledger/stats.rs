//! Group-commit statistics: counters and recent samples of batch size and commit latency, plus
//! an optional hook called after every commit (how the metrics registry observes them without
//! the allocator depending on a metrics library).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many recent commits a [`CommitStats`] snapshot carries.
pub const RECENT_COMMITS: usize = 1024;

/// One commit of the writer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommitSample {
    /// Operations the commit carried.
    pub batch_size: usize,
    /// Time from the start of the write transaction to the end of the commit.
    pub duration: Duration,
    /// Whether the commit succeeded.
    pub ok: bool,
    /// Whether the commit was synced to disk. Only a batch of deferred confirmations alone is
    /// not; the next durable commit carries it.
    pub durable: bool,
}

/// A hook called by the writer thread after every commit; it must be quick.
pub type CommitHook = Arc<dyn Fn(&CommitSample) + Send + Sync>;

/// A snapshot of the writer's statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommitStats {
    /// Successful commits (durable or not).
    pub commits: u64,
    /// Failed commits.
    pub failed_commits: u64,
    /// Operations carried by successful commits.
    pub operations: u64,
    /// The most recent commits, oldest first (at most [`RECENT_COMMITS`]).
    pub recent: Vec<CommitSample>,
}

impl CommitStats {
    /// Mean operations per successful commit.
    pub fn mean_batch_size(&self) -> f64 {
        if self.commits == 0 {
            0.0
        } else {
            self.operations as f64 / self.commits as f64
        }
    }
}

#[derive(Default)]
pub(crate) struct StatsRecorder {
    commits: AtomicU64,
    failed_commits: AtomicU64,
    operations: AtomicU64,
    recent: Mutex<VecDeque<CommitSample>>,
    hook: Option<CommitHook>,
}

impl StatsRecorder {
    pub(crate) fn new(hook: Option<CommitHook>) -> Self {
        StatsRecorder {
            hook,
            ..StatsRecorder::default()
        }
    }

    pub(crate) fn record(&self, sample: CommitSample) {
        if sample.ok {
            self.commits.fetch_add(1, Ordering::Relaxed);
            self.operations
                .fetch_add(sample.batch_size as u64, Ordering::Relaxed);
        } else {
            self.failed_commits.fetch_add(1, Ordering::Relaxed);
        }
        {
            let mut recent = self
                .recent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if recent.len() == RECENT_COMMITS {
                recent.pop_front();
            }
            recent.push_back(sample);
        }
        if let Some(hook) = &self.hook {
            hook(&sample);
        }
    }

    pub(crate) fn snapshot(&self) -> CommitStats {
        CommitStats {
            commits: self.commits.load(Ordering::Relaxed),
            failed_commits: self.failed_commits.load(Ordering::Relaxed),
            operations: self.operations.load(Ordering::Relaxed),
            recent: self
                .recent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .copied()
                .collect(),
        }
    }
}
