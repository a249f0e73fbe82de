//! Crash chaos: the simulator in one process, the controller in another, a churn workload of
//! immediate claims and pods with claim templates; the controller is killed with SIGKILL at
//! random moments and while paused at failpoints (after the intent commit before the status
//! write, after the status write before the confirm, during deallocation, in the middle of a
//! group commit), then restarted, `DRA_CHAOS_KILLS` times (default 16).
//!
//! Checked throughout (a watch of the claims, after every event): no exclusive device is named
//! by two allocated claims, no shared device has more claims than `maxConsumers`. Checked at
//! every kill (nothing writes allocations then): `dra-ledger ledger verify` passes and every
//! allocated claim is in the ledger with its devices. Checked at the end, after the workload
//! was deleted and a restarted controller drained it: no claim or pod is left, the ledger holds
//! no allocation and no pending intent and verifies. The counts are printed
//! (`cargo test -p dra-controller --features failpoints --test chaos kill:: -- --nocapture`); `DRA_CHAOS_SEED` repeats a
//! run, `DRA_CHAOS_FAULTS=1` adds the simulator's API faults of `chaos_faults`.
//! `controller/scripts/chaos-long.sh` runs hundreds of kills in release mode.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::chaos_support::checks::{at_kill, ledger_contents, verify_ledger};
use crate::chaos_support::controller::{http_get, ControllerProcess, ControllerSpec, Startup};
use crate::chaos_support::drain::{assert_drained, drain};
use crate::chaos_support::report::Report;
use crate::chaos_support::sim::{fault_args, SimProcess};
use crate::chaos_support::watcher::ClaimWatcher;
use crate::chaos_support::workload::{self, Churn, ChurnConfig};
use crate::chaos_support::{env_number, seed, Random};

/// The failpoints a kill cycle may arm.
const FAILPOINTS: [&str; 4] = [
    "after_intent_commit",
    "after_status_write",
    "during_deallocation",
    "group_commit",
];

/// How long a restarted controller may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an armed failpoint is waited for before the process is killed anyway.
const FAILPOINT_TIMEOUT: Duration = Duration::from_secs(6);
/// How long the drain at the end may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// The simulator's flags: 4 nodes of 4 devices; with `DRA_CHAOS_FAULTS=1` also the API faults
/// of `chaos_faults`, so that restarts happen under conflicts, errors and watch drops.
fn sim_args(seed: u64) -> Vec<String> {
    let mut args = ["--nodes", "4", "--devices-per-node", "4"]
        .map(String::from)
        .to_vec();
    if env_number("DRA_CHAOS_FAULTS", 0) == 1 {
        args.extend(fault_args(seed));
    }
    args
}

/// One controller with leader election on (the default of `run`) under a fixed identity, so a
/// restart takes its own lease back at once.
fn controller_spec(sim: &SimProcess, dir: &std::path::Path, workers: &str) -> ControllerSpec {
    ControllerSpec {
        kubeconfig: sim.kubeconfig.clone(),
        ledger: dir.join("ledger.redb"),
        extra_args: ["--workers", workers, "--leader-elect-identity", "chaos-0"]
            .map(String::from)
            .to_vec(),
    }
}

/// Starts a controller, lets it work until a random moment or until it pauses at the armed
/// failpoint, kills it with SIGKILL and runs the checks of a kill; panics on any problem.
async fn kill_cycle(
    cycle: u64,
    spec: &ControllerSpec,
    rng: &mut Random,
    report: &mut Report,
    client: &kube::Client,
    watcher: &ClaimWatcher,
) {
    // Every other kill at a failpoint, taking the points in turn, at one of its first hits.
    let armed = (cycle % 2 == 1).then(|| {
        let point = FAILPOINTS[(cycle / 2) as usize % FAILPOINTS.len()];
        format!("{point}@{}", rng.between(1, 4))
    });
    let mut controller = ControllerProcess::spawn(spec, armed.as_deref());
    match controller.wait_ready(READY_TIMEOUT).await {
        Startup::Ready(took) => report.recoveries.push(took),
        Startup::Frozen(_) => report.frozen_before_ready += 1,
    }
    let mode = if armed.is_some() {
        match controller.wait_failpoint(FAILPOINT_TIMEOUT).await {
            Some(point) => {
                *report.failpoints.entry(point).or_default() += 1;
                "failpoint"
            }
            None => "failpoint_timeout",
        }
    } else {
        let work = Duration::from_millis(rng.between(200, 2000));
        controller.run_for(work).await;
        "random"
    };
    let output = controller.recent_output();
    controller.kill();
    report.kill(mode);
    let (problems, _) = at_kill(client, &spec.ledger).await;
    let observed = watcher.observed();
    assert!(
        problems.is_empty() && observed.violations == 0,
        "after kill {cycle} ({mode}, armed {armed:?}): {problems:#?}\nwatcher: {:#?}\ncontroller output:\n{output}",
        observed.first_violations
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_killed_at_random_moments_and_failpoints_never_double_allocates_or_leaks() {
    let _churn = crate::chaos_support::one_churn_at_a_time().await;
    let seed = seed();
    let kills = env_number("DRA_CHAOS_KILLS", 16);
    println!("chaos_kill: seed {seed}, {kills} kills");
    let started = Instant::now();
    let mut rng = Random::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let sim = SimProcess::start(dir.path(), &sim_args(seed)).await;
    let client = sim.client().await;
    workload::setup(&client).await;
    let watcher = ClaimWatcher::start(&client);
    let churn = Churn::start(&client, ChurnConfig::default(), seed);
    let spec = controller_spec(&sim, dir.path(), "4");
    let mut report = Report::default();
    for cycle in 0..kills {
        kill_cycle(cycle, &spec, &mut rng, &mut report, &client, &watcher).await;
    }

    let counts = churn.stop().await;
    let mut controller = ControllerProcess::spawn(&spec, None);
    assert!(matches!(
        controller.wait_ready(READY_TIMEOUT).await,
        Startup::Ready(_)
    ));
    drain(&client, &mut controller, DRAIN_TIMEOUT).await;
    let status = controller.terminate(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "controller exit after SIGTERM: {status:?}"
    );
    let (verified, contents) = assert_drained(&spec.ledger);

    let observed = watcher.stop();
    report.allocations_observed = observed.allocated_uids.len();
    report.audit = contents.audit;
    report.violations = observed.violations;
    report.created = (
        counts.claims_created.load(Ordering::Relaxed),
        counts.pods_created.load(Ordering::Relaxed),
    );
    println!("{report}");
    println!("{verified}");
    println!("chaos_kill took {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(
        observed.violations, 0,
        "violations: {:#?}",
        observed.first_violations
    );
    assert_eq!(report.total_kills(), kills);
    assert!(
        report.allocations_observed > 0 && !report.recoveries.is_empty(),
        "the run allocated nothing or never recovered: {report}"
    );
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn armed_failpoint_pauses_the_test_built_binary_before_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let sim = SimProcess::start(dir.path(), &sim_args(0)).await;
    let spec = controller_spec(&sim, dir.path(), "2");
    // The first commit of a new ledger writes the inventory from the ResourceSlices.
    let mut controller = ControllerProcess::spawn(&spec, Some("group_commit@1"));
    assert_eq!(
        controller.wait_ready(READY_TIMEOUT).await,
        Startup::Frozen("group_commit".into())
    );
    let pid = controller.pid();
    assert!(
        controller
            .recent_output()
            .contains(&format!("FAILPOINT group_commit pid={pid}")),
        "{}",
        controller.recent_output()
    );
    controller.run_for(Duration::from_secs(1)).await;
    let addr = controller.addr().expect("admin address").to_owned();
    let (status, body) = http_get(&addr, "/readyz")
        .await
        .expect("the admin server still answers");
    assert_eq!(status, 503, "paused before the inventory commit: {body}");
    assert!(body.contains("caches synced"), "{body}");
    assert!(
        controller.cpu_time().is_some(),
        "the process is still alive"
    );
    let status = controller.kill();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    verify_ledger(&spec.ledger).unwrap_or_else(|e| panic!("{e}"));
    let contents = ledger_contents(&spec.ledger);
    assert_eq!(
        (contents.nodes, contents.audit.values().sum::<u64>()),
        (0, 0),
        "nothing of the paused batch was committed"
    );
    sim.stop();
}

#[test]
fn device_check_reports_a_device_held_twice_or_shared_past_its_limit() {
    use crate::chaos_support::checks::{device_problems, ClusterClaim};
    use dra_controller::driver::handle::{HandleData, HandleSharing};
    let held = |name: &str, devices: &[&str], sharing| ClusterClaim {
        name: name.to_owned(),
        uid: format!("uid-{name}"),
        data: HandleData {
            node: "node-0".into(),
            devices: devices.iter().map(|d| (*d).to_owned()).collect(),
            sharing,
            claim_uid: format!("uid-{name}"),
        },
    };
    let shared = HandleSharing::Shared { max_consumers: 2 };
    let fine = [
        held("a", &["gpu-0", "gpu-1"], HandleSharing::Exclusive),
        held("b", &["gpu-2"], shared),
        held("c", &["gpu-2"], shared),
    ];
    assert!(device_problems(&fine).is_empty());
    let twice = [
        held("a", &["gpu-0", "gpu-1"], HandleSharing::Exclusive),
        held("b", &["gpu-1"], HandleSharing::Exclusive),
    ];
    let problems = device_problems(&twice);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("node-0/gpu-1") && problems[0].contains("\"b\""));
    let crowded = [
        held("b", &["gpu-2"], shared),
        held("c", &["gpu-2"], shared),
        held("d", &["gpu-2"], shared),
    ];
    assert_eq!(device_problems(&crowded).len(), 1);
    let mixed = [
        held("b", &["gpu-2"], shared),
        held("e", &["gpu-2"], HandleSharing::Exclusive),
    ];
    assert_eq!(device_problems(&mixed).len(), 1);
}

#[test]
fn ledger_check_reports_claims_the_ledger_lacks_or_holds_with_other_devices() {
    use crate::chaos_support::checks::{missing_in_ledger, ClusterClaim, LedgerContents};
    use dra_controller::driver::handle::{HandleData, HandleSharing};
    let shown = |uid: &str, device: &str| ClusterClaim {
        name: format!("default/{uid}"),
        uid: uid.to_owned(),
        data: HandleData {
            node: "node-1".into(),
            devices: vec![device.to_owned()],
            sharing: HandleSharing::Exclusive,
            claim_uid: uid.to_owned(),
        },
    };
    let mut contents = LedgerContents::default();
    contents
        .allocations
        .insert("u1".into(), ("node-1".into(), vec!["gpu-0".into()]));
    contents
        .allocations
        .insert("u2".into(), ("node-1".into(), vec!["gpu-3".into()]));
    let claims = [
        shown("u1", "gpu-0"),
        shown("u2", "gpu-1"),
        shown("u3", "gpu-2"),
    ];
    let problems = missing_in_ledger(&claims, &contents);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("default/u2") && problems[0].contains("gpu-3"));
    assert!(problems[1].contains("default/u3") && problems[1].contains("holds nothing"));
}
