//! API faults: the simulator answers 10% of writes with 409 Conflict and 5% with 500, fails 2% of
//! gets and lists with 500, delays 10% of writes by 100–200 ms and ends every watch after a
//! random time of up to 4 s. The churn workload of `chaos_kill` runs against `dra-ledger run` for
//! `DRA_CHAOS_FAULT_SECONDS` (default 20), then is deleted and must drain.
//!
//! Checked: the same guarantees as under kills (no exclusive device named twice and no shared
//! device over `maxConsumers` at any observed moment; the drained ledger holds nothing and
//! verifies); backoff instead of busy loops, shown by the controller's API requests per
//! allocated claim (its `dra_ledger_api_requests_total`) and its CPU time from `/proc`, both
//! printed and bounded; bounded memory, from `VmRSS` sampled through the run, printed and kept
//! under a generous ceiling.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::chaos_support::controller::{metric_sum, ControllerProcess, ControllerSpec, Startup};
use crate::chaos_support::drain::{assert_drained, drain};
use crate::chaos_support::sim::{fault_args, logged_count, SimProcess};
use crate::chaos_support::watcher::ClaimWatcher;
use crate::chaos_support::workload::{self, Churn, ChurnConfig};
use crate::chaos_support::{env_number, seed};

/// Resident memory the controller must stay under (it runs at a few tens of MiB).
const RSS_CEILING_KIB: u64 = 256 * 1024;
/// API requests per allocated claim above which the controller counts as busy-looping. A claim
/// takes a handful (finalizer, allocation status, status clear, finalizer removal, events), plus
/// the retries of injected faults and the lease renewals spread over the claims.
const MAX_REQUESTS_PER_CLAIM: f64 = 40.0;
/// Share of one core the controller may use on average.
const MAX_CPU_SHARE: f64 = 0.5;

/// The read-error rate of this test. The run serves about 150 gets and lists, so the shared
/// 2% injected none in about one run of twenty and the check that every kind of fault was
/// injected failed; at 5% about 7 are expected and none happens in about one run of 1,800.
const READ_ERROR_RATE: &str = "0.05";

/// The simulator's flags: 4 nodes of 4 devices and every kind of fault, seeded from `seed`.
fn sim_args(seed: u64) -> Vec<String> {
    let mut args = ["--nodes", "4", "--devices-per-node", "4"]
        .map(String::from)
        .to_vec();
    args.extend(fault_args(seed));
    let rate = args
        .iter()
        .position(|a| a == "--fault-read-error-rate")
        .expect("the shared fault flags set a read-error rate")
        + 1;
    READ_ERROR_RATE.clone_into(&mut args[rate]);
    args
}

/// Lets `controller` work for `duration`, sampling its resident memory every 500 ms; panics
/// if it exits. Returns the largest sample and the number of samples.
async fn sample_while_working(
    controller: &mut ControllerProcess,
    duration: Duration,
) -> (u64, u32) {
    let started = Instant::now();
    let (mut max_rss, mut samples) = (0, 0);
    while started.elapsed() < duration {
        controller.run_for(Duration::from_millis(500)).await;
        assert!(
            controller.exited().is_none(),
            "the controller exited under faults:\n{}",
            controller.recent_output()
        );
        if let Some(rss) = controller.rss_kib() {
            max_rss = max_rss.max(rss);
            samples += 1;
        }
    }
    (max_rss, samples)
}

/// The counts of the faults the simulator logged when it stopped.
fn injected_faults(log: &str) -> Vec<(&'static str, Option<u64>)> {
    [
        "conflicts",
        "errors",
        "read_errors",
        "delays",
        "watch_disconnects",
    ]
    .into_iter()
    .map(|field| (field, logged_count(log, field)))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_conflicts_errors_slow_writes_and_watch_drops_the_workload_converges_with_backoff() {
    let _churn = crate::chaos_support::one_churn_at_a_time().await;
    let seed = seed();
    let seconds = env_number("DRA_CHAOS_FAULT_SECONDS", 20);
    println!("chaos_faults: seed {seed}, {seconds} s of churn");
    let dir = tempfile::tempdir().unwrap();
    let sim = SimProcess::start(dir.path(), &sim_args(seed)).await;
    let client = sim.client().await;
    workload::setup(&client).await;
    let watcher = ClaimWatcher::start(&client);
    let spec = ControllerSpec {
        kubeconfig: sim.kubeconfig.clone(),
        ledger: dir.path().join("ledger.redb"),
        extra_args: ["--workers", "4", "--leader-elect-identity", "chaos-0"]
            .map(String::from)
            .to_vec(),
    };
    let mut controller = ControllerProcess::spawn(&spec, None);
    let Startup::Ready(to_ready) = controller.wait_ready(Duration::from_secs(60)).await else {
        panic!("no failpoint is armed")
    };
    let started = Instant::now();
    let churn = Churn::start(&client, ChurnConfig::default(), seed);
    let (mut max_rss, samples) =
        sample_while_working(&mut controller, Duration::from_secs(seconds)).await;
    let counts = churn.stop().await;
    drain(&client, &mut controller, Duration::from_secs(120)).await;
    let wall = started.elapsed();
    let cpu = controller.cpu_time().expect("cpu time of the controller");
    max_rss = max_rss.max(controller.rss_kib().unwrap_or(0));
    let metrics = controller.metrics().await.expect("metrics answer");
    let requests = metric_sum(&metrics, "dra_ledger_api_requests_total");
    let status = controller.terminate(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "controller exit after SIGTERM: {status:?}"
    );
    let (verified, contents) = assert_drained(&spec.ledger);
    let observed = watcher.stop();

    let allocated = observed.allocated_uids.len();
    let per_claim = requests / allocated.max(1) as f64;
    let cpu_share = cpu.as_secs_f64() / wall.as_secs_f64();
    println!(
        "workload: {} immediate claims, {} pods created; {allocated} claims seen allocated; ready after {:.0} ms; churn and drain took {:.1} s",
        counts.claims_created.load(Ordering::Relaxed),
        counts.pods_created.load(Ordering::Relaxed),
        to_ready.as_secs_f64() * 1000.0,
        wall.as_secs_f64()
    );
    println!(
        "controller: {requests} API requests ({per_claim:.1} per allocated claim), CPU {:.2} s ({:.0}% of one core), max RSS {} KiB over {samples} samples",
        cpu.as_secs_f64(),
        cpu_share * 100.0,
        max_rss
    );
    println!(
        "watch: {} events, {} relists; ledger audit {:?}; violations {}",
        observed.events, observed.relists, contents.audit, observed.violations
    );
    println!("{verified}");
    assert_eq!(
        observed.violations, 0,
        "violations: {:#?}",
        observed.first_violations
    );
    assert!(
        allocated > 20,
        "too little was allocated to judge: {allocated}"
    );
    assert!(
        per_claim < MAX_REQUESTS_PER_CLAIM,
        "{per_claim:.1} API requests per allocated claim"
    );
    assert!(
        cpu_share < MAX_CPU_SHARE,
        "the controller used {:.0}% of a core",
        cpu_share * 100.0
    );
    assert!(max_rss < RSS_CEILING_KIB, "max RSS {max_rss} KiB");
    let log = sim.stop();
    let injected = injected_faults(&log);
    println!("simulator injected: {injected:?}");
    assert!(
        injected.iter().all(|(_, n)| n.is_some_and(|n| n > 0)),
        "every kind of fault was injected: {injected:?}"
    );
}
