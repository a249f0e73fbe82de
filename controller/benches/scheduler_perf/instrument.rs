//! Where the controller's time goes: a client layer timing every API request by verb, a driver
//! observer timing `unsuitable_nodes` and `allocate`, the ledger's commit hook, and the CPU time
//! of a process from `/proc/<pid>/stat`.
//!
//! Collection only; the report formats what is gathered here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dra_allocator::ledger::{CommitHook, CommitSample};
use dra_api::{ApiCall, ApiCallLayer, ApiCallSink};
use dra_controller::driver::{AllocationMode, AllocationOutcome, DriverObserver};

/// Count and total time of one kind of operation, plus the samples for percentiles.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    /// The durations, in the order they were recorded.
    pub samples: Vec<Duration>,
    /// A per-operation size (claims per allocate, operations per commit), summed.
    pub items: u64,
}

impl Timing {
    fn record(&mut self, took: Duration, items: u64) {
        self.samples.push(took);
        self.items += items;
    }

    /// Number of operations.
    pub fn count(&self) -> usize {
        self.samples.len()
    }

    /// Sum of the durations.
    pub fn total(&self) -> Duration {
        self.samples.iter().sum()
    }

    /// Mean duration (zero when empty).
    pub fn mean(&self) -> Duration {
        if self.samples.is_empty() {
            Duration::ZERO
        } else {
            self.total() / self.samples.len() as u32
        }
    }
}

/// Everything the instruments gathered, by operation name (`api get`, `allocate`, ...).
#[derive(Clone, Default)]
pub struct Recorder {
    timings: Arc<Mutex<BTreeMap<String, Timing>>>,
}

impl Recorder {
    fn record(&self, name: &str, took: Duration, items: u64) {
        let mut timings = self.timings.lock().expect("recorder lock");
        timings
            .entry(name.to_owned())
            .or_default()
            .record(took, items);
    }

    /// Takes what was recorded so far and starts afresh.
    pub fn take(&self) -> BTreeMap<String, Timing> {
        std::mem::take(&mut *self.timings.lock().expect("recorder lock"))
    }

    /// The ledger commit hook recording into this recorder.
    pub fn commit_hook(&self) -> CommitHook {
        let recorder = self.clone();
        Arc::new(move |sample: &CommitSample| {
            if sample.ok {
                recorder.record("ledger commit", sample.duration, sample.batch_size as u64);
            }
        })
    }
}

impl DriverObserver for Recorder {
    fn allocation(
        &self,
        mode: AllocationMode,
        outcome: AllocationOutcome,
        claims: usize,
        duration: Duration,
    ) {
        let _ = outcome;
        let name = if mode == AllocationMode::Mirrored {
            "mirror import"
        } else {
            "driver allocate"
        };
        self.record(name, duration, claims as u64);
    }

    fn unsuitable_nodes(&self, duration: Duration) {
        self.record("driver unsuitable_nodes", duration, 1);
    }
}

/// Every API request by verb (a GET of one object and of a list alike: `get/list`), with the
/// status code when it was no success.
impl ApiCallSink for Recorder {
    fn api_call(&self, call: ApiCall) {
        let verb = if call.verb == "get" {
            "get/list"
        } else {
            call.verb
        };
        let name = match call.status {
            Some(status) if status.is_success() => format!("api {verb}"),
            Some(status) => format!("api {verb} {}", status.as_u16()),
            None => format!("api {verb} error"),
        };
        self.record(&name, call.took, 1);
    }
}

/// A client layer recording the time of every request until its response headers arrive.
pub type TimingLayer = ApiCallLayer<Recorder>;

/// User plus system CPU time of process `pid` (`self` for this one), from `/proc/<pid>/stat`.
/// `None` where procfs is not available.
pub fn cpu_time(pid: &str) -> Option<Duration> {
    stat_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU time of this process's threads whose name starts with one of `prefixes` (a thread that
/// has ended is not counted, so the threads measured must outlive the measurement).
pub fn threads_cpu(prefixes: &[&str]) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .filter(|stat| {
            let name = stat
                .find('(')
                .zip(stat.rfind(')'))
                .map_or("", |(open, close)| &stat[open + 1..close]);
            prefixes.iter().any(|p| name.starts_with(p))
        })
        .filter_map(|stat| stat_cpu(&stat))
        .sum()
}

fn stat_cpu(stat: &str) -> Option<Duration> {
    // Clock ticks per second of utime/stime; 100 on every Linux platform this runs on.
    const TICKS_PER_SECOND: u64 = 100;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SECOND,
    ))
}
