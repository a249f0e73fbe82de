//! The benchmark's tables: throughput, creation-to-binding latency and CPU per workload; the
//! time between the steps of each pod's timeline (where the pods wait); and the controller's
//! internal operations (driver calls, ledger commits, API requests by verb).
//!
//! Formatting only.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::instrument::Timing;
use crate::tracker::PodTimes;

/// One step of the pod timelines: the percentiles of the time between two of its instants.
pub struct Stage {
    /// What happens in the step.
    pub name: &'static str,
    /// Sorted durations of the pods that reached both instants.
    pub sorted: Vec<Duration>,
}

type Instant2 = fn(&PodTimes) -> Option<Instant>;

impl Stage {
    fn between(name: &'static str, pods: &[PodTimes], from: Instant2, to: Instant2) -> Stage {
        let mut sorted: Vec<Duration> = pods
            .iter()
            .filter_map(|t| Some(to(t)?.saturating_duration_since(from(t)?)))
            .collect();
        sorted.sort();
        Stage { name, sorted }
    }

    /// Creation to binding, then each step in between.
    pub fn all(pods: &[PodTimes]) -> Vec<Stage> {
        vec![
            Stage::between("created -> bound", pods, |t| t.created, |t| t.bound),
            Stage::between(
                "created -> claims made (resourceclaim ctrl)",
                pods,
                |t| t.created,
                |t| t.claims_made,
            ),
            Stage::between(
                "claims made -> context published (scheduler)",
                pods,
                |t| t.claims_made,
                |t| t.context,
            ),
            Stage::between(
                "context -> all claims allocated (controller)",
                pods,
                |t| t.context,
                |t| t.allocated_at,
            ),
            Stage::between(
                "claims made -> all claims allocated (1.34 scheduler)",
                pods,
                |t| {
                    if t.context.is_none() {
                        t.claims_made
                    } else {
                        None
                    }
                },
                |t| t.allocated_at,
            ),
            Stage::between(
                "allocated -> bound (scheduler)",
                pods,
                |t| t.allocated_at,
                |t| t.bound,
            ),
        ]
    }

    /// The mean time of a bound pod spent in the controller's step (from its scheduling context
    /// to its last claim allocated) and in the simulator's steps (the rest of creation to
    /// binding). On 1.34 the controller is not on a pod's path: all of it is the simulator's.
    pub fn split(pods: &[PodTimes]) -> (Duration, Duration) {
        let mut controller = Duration::ZERO;
        let mut sim = Duration::ZERO;
        let mut count = 0u32;
        for pod in pods {
            let (Some(created), Some(bound)) = (pod.created, pod.bound) else {
                continue;
            };
            let own = match (pod.context, pod.allocated_at) {
                (Some(context), Some(allocated)) => allocated.saturating_duration_since(context),
                _ => Duration::ZERO,
            };
            let total = bound.saturating_duration_since(created);
            controller += own;
            sim += total.saturating_sub(own);
            count += 1;
        }
        if count == 0 {
            return (Duration::ZERO, Duration::ZERO);
        }
        (controller / count, sim / count)
    }

    /// The `p`-th percentile (0..=100), zero when empty.
    pub fn percentile(&self, p: usize) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let index = (self.sorted.len() * p / 100).min(self.sorted.len() - 1);
        self.sorted[index]
    }
}

/// The outcome of one workload's measured phase.
pub struct Measured {
    /// Workload name.
    pub name: &'static str,
    /// The Kubernetes release simulated.
    pub release: &'static str,
    /// Measured pods created.
    pub pods: usize,
    /// Their claims.
    pub claims: usize,
    /// Measured pods seen bound before the timeout.
    pub bound: usize,
    /// Time to create the measured pods.
    pub created: Duration,
    /// From the first creation to the last binding.
    pub wall: Duration,
    /// CPU of the controller's threads (its runtime and its ledger's writer).
    pub controller_cpu: Duration,
    /// CPU of the rest of this process: the load generator and its watches.
    pub load_cpu: Duration,
    /// CPU of the simulator process.
    pub sim_cpu: Duration,
    /// Creation to binding, and the steps in between.
    pub latencies: Vec<Stage>,
    /// The mean time of a pod in the controller's step and in the simulator's ([`Stage::split`]).
    pub split: (Duration, Duration),
    /// The controller's operations during the phase.
    pub timings: BTreeMap<String, Timing>,
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// Prints every table.
pub fn print(results: &[Measured], workers: usize, rate: Option<f64>, kubelet: bool) {
    println!();
    println!("scheduler_perf on the simulated cluster: 100 nodes x 20 devices, {workers} controller workers on 1.30");
    if kubelet {
        println!("every node runs the simulated kubelet, which starts a pod once it is bound");
    } else {
        println!("the nodes run no kubelet (bound pods stay Pending), as in the upstream harness");
    }
    match rate {
        Some(rate) => println!("measured pods created at a steady {rate:.0} pods/s"),
        None => {
            println!("measured pods created all at once (as fast as the API server takes them)");
        }
    }
    println!();
    println!(
        "| release | workload | pods | claims | bound | pods/s | p50 ms | p99 ms | controller CPU ms/pod | sim CPU ms/pod | load generator CPU ms/pod | sim share of CPU | sim share of a pod's time |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let total = &r.latencies[0];
        let rate = r.bound as f64 / r.wall.as_secs_f64();
        let per_pod = |d: Duration| d.as_secs_f64() * 1000.0 / r.bound.max(1) as f64;
        let share = |part: Duration, other: Duration| {
            100.0 * part.as_secs_f64() / (part + other).as_secs_f64().max(f64::MIN_POSITIVE)
        };
        let (controller_time, sim_time) = r.split;
        println!(
            "| {} | {} | {} | {} | {} | {:.0} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} % | {:.0} % |",
            r.release,
            r.name,
            r.pods,
            r.claims,
            r.bound,
            rate,
            ms(total.percentile(50)),
            ms(total.percentile(99)),
            per_pod(r.controller_cpu),
            per_pod(r.sim_cpu),
            per_pod(r.load_cpu),
            share(r.sim_cpu, r.controller_cpu),
            share(sim_time, controller_time),
        );
    }
    println!();
    println!(
        "CPU: the controller's threads, the simulator process, and the rest of this process (pod \
         creation and the watches that time each pod). A pod's time: its scheduling context to \
         its claims allocated is the controller's step, the rest the simulator's (on 1.34 all of \
         it: the scheduler allocates, the controller mirrors)."
    );
    for r in results {
        println!();
        println!(
            "{} on {}: measured pods created in {} ms, all bound after {} ms",
            r.name,
            r.release,
            ms(r.created),
            ms(r.wall)
        );
        println!();
        println!("| step | p50 ms | p90 ms | p99 ms |");
        println!("|---|---:|---:|---:|");
        for stage in r.latencies.iter().filter(|s| !s.sorted.is_empty()) {
            println!(
                "| {} | {} | {} | {} |",
                stage.name,
                ms(stage.percentile(50)),
                ms(stage.percentile(90)),
                ms(stage.percentile(99))
            );
        }
        println!();
        println!("| controller operation | count | per pod | mean ms | total s | items |");
        println!("|---|---:|---:|---:|---:|---:|");
        for (name, timing) in &r.timings {
            println!(
                "| {} | {} | {:.2} | {} | {:.2} | {} |",
                name,
                timing.count(),
                timing.count() as f64 / r.bound.max(1) as f64,
                ms(timing.mean()),
                timing.total().as_secs_f64(),
                timing.items
            );
        }
    }
}
