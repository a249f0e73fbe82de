//! Safe failover: two `dra-ledger run` replicas with leader election (each its own ledger, as
//! two `StatefulSet` pods have) against `dra-ledger sim` under the churn of `chaos_kill`. The
//! leader is taken out `DRA_FAILOVER_KILLS` times (default 8): mostly with SIGKILL, and every
//! third time frozen with SIGSTOP past its lease, so that the standby takes over while the old
//! leader still runs; when it wakes it must find its lease lost, write nothing more and exit 1.
//! The replaced replica comes back as a new process (a new identity, as a restarted pod has) and
//! waits as the standby.
//!
//! Checked throughout (the claim watch): no exclusive device named by two allocated claims, no
//! shared device over `maxConsumers`. At every kill, with the standby frozen so that nothing can
//! allocate: `ledger verify` passes on the killed leader's ledger and it holds every allocated
//! claim's devices. At the end, after the workload drained: the last leader stops with SIGTERM
//! (releasing the lease), the other replica takes over and reconciles its stale ledger, and then
//! both ledgers hold nothing and verify.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::chaos_support::checks::{at_kill, verify_ledger};
use crate::chaos_support::controller::{ControllerProcess, ControllerSpec};
use crate::chaos_support::drain::{assert_drained, drain};
use crate::chaos_support::report::Report;
use crate::chaos_support::sim::SimProcess;
use crate::chaos_support::watcher::ClaimWatcher;
use crate::chaos_support::workload::{self, Churn, ChurnConfig};
use crate::chaos_support::{env_number, seed, Random};
use testkit::process::{signal_pid as signal, SHORT_LEASE_ARGS};

/// The lease of `SHORT_LEASE_ARGS`: a lease not renewed expires after 2 s.
const LEASE: Duration = Duration::from_secs(2);
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// One `StatefulSet` pod: a fixed ledger file (its volume) and the process running on it.
struct Replica {
    name: &'static str,
    ledger: PathBuf,
    kubeconfig: PathBuf,
    process: Option<ControllerProcess>,
    starts: u32,
}

impl Replica {
    fn new(name: &'static str, dir: &std::path::Path, kubeconfig: PathBuf) -> Replica {
        Replica {
            name,
            ledger: dir.join(format!("{name}.redb")),
            kubeconfig,
            process: None,
            starts: 0,
        }
    }

    /// Starts a new process; every process has an identity of its own.
    fn spawn(&mut self) {
        self.starts += 1;
        let identity = format!("{}-{}", self.name, self.starts);
        let mut extra: Vec<String> = ["--workers", "4", "--leader-elect-identity", &identity]
            .map(String::from)
            .to_vec();
        extra.extend(SHORT_LEASE_ARGS.map(String::from));
        let spec = ControllerSpec {
            kubeconfig: self.kubeconfig.clone(),
            ledger: self.ledger.clone(),
            extra_args: extra,
        };
        self.process = Some(ControllerProcess::spawn(&spec, None));
    }

    fn process(&mut self) -> &mut ControllerProcess {
        self.process.as_mut().expect("running")
    }

    /// The `/readyz` status word (`ready`, `standby`), if it answers 200.
    async fn status(&mut self) -> Option<&'static str> {
        match self.process.as_mut()?.readyz().await {
            Some((200, body)) if body.contains("\"standby\"") => Some("standby"),
            Some((200, body)) if body.contains("\"ready\"") => Some("ready"),
            _ => None,
        }
    }

    async fn wait_status(&mut self, wanted: &str, timeout: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self.status().await == Some(wanted) {
                return started.elapsed();
            }
            let process = self.process();
            assert!(
                process.exited().is_none() && started.elapsed() < timeout,
                "{} not {wanted} within {timeout:?}:\n{}",
                self_name(process),
                process.recent_output()
            );
            process.run_for(Duration::from_millis(50)).await;
        }
    }
}

fn self_name(process: &ControllerProcess) -> String {
    format!("controller pid {}", process.pid())
}

/// Which of the two leads now, waiting for one to.
async fn leader_index(replicas: &mut [Replica; 2]) -> usize {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        for (i, replica) in replicas.iter_mut().enumerate() {
            if replica.status().await == Some("ready") {
                return i;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no leader within {READY_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Kills the leader with SIGKILL while the standby is frozen, checks the killed leader's ledger
/// against the frozen cluster, then lets the standby take over and restarts the killed replica.
async fn kill_leader(
    replicas: &mut [Replica; 2],
    leader: usize,
    client: &kube::Client,
    report: &mut Report,
) -> Vec<String> {
    let standby = 1 - leader;
    let standby_pid = replicas[standby].process().pid();
    signal(standby_pid, "STOP");
    let dead = replicas[leader].process.take().expect("leader runs");
    let output = dead.recent_output();
    dead.kill();
    report.kill("sigkill");
    let (mut problems, _) = at_kill(client, &replicas[leader].ledger).await;
    signal(standby_pid, "CONT");
    if !problems.is_empty() {
        problems.push(format!("killed leader's output:\n{output}"));
        return problems;
    }
    let took = replicas[standby].wait_status("ready", READY_TIMEOUT).await;
    report.recoveries.push(took);
    replicas[leader].spawn();
    replicas[leader].wait_status("standby", READY_TIMEOUT).await;
    problems
}

/// Freezes the leader past its lease; the standby must take over; the old leader, woken, must
/// exit 1 having found its lease lost. Then it is restarted as the standby.
/// Returns how many writes the woken leader's fence refused (API requests and ledger commits).
async fn freeze_leader(replicas: &mut [Replica; 2], leader: usize, report: &mut Report) -> usize {
    let standby = 1 - leader;
    let pid = replicas[leader].process().pid();
    signal(pid, "STOP");
    let took = replicas[standby].wait_status("ready", READY_TIMEOUT).await;
    assert!(took >= LEASE.mul_f64(0.75), "took over too early: {took:?}");
    report.recoveries.push(took);
    signal(pid, "CONT");
    let old = replicas[leader].process();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = old.exited() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "a leader woken after losing its lease kept running:\n{}",
            old.recent_output()
        );
        old.run_for(Duration::from_millis(50)).await;
    };
    let output = old.recent_output();
    assert_eq!(status.code(), Some(1), "{output}");
    assert!(output.contains("lost the leader lease"), "{output}");
    let refused = output
        .lines()
        .filter(|l| l.contains("Refused a write") || l.contains("Ledger commit refused"))
        .count();
    report.kill("sigstop");
    replicas[leader].process = None;
    verify_ledger(&replicas[leader].ledger).unwrap_or_else(|e| panic!("{e}"));
    replicas[leader].spawn();
    replicas[leader].wait_status("standby", READY_TIMEOUT).await;
    refused
}

/// The allocations left in a ledger, each with its intent history and audit entries.
fn leftovers(path: &std::path::Path) -> String {
    let ledger =
        dra_allocator::ledger::Ledger::open(path, crate::chaos_support::DRIVER).expect("opens");
    let mut text = String::new();
    let page = ledger
        .allocations(&dra_allocator::ledger::AllocationQuery {
            limit: 100,
            ..Default::default()
        })
        .expect("allocations");
    let audit = ledger.audit_since(0, 100_000).expect("audit");
    for allocation in page.items {
        let uid = &allocation.claim.uid;
        let _ = writeln!(
            text,
            "{allocation:?}\n{:#?}",
            ledger.claim(uid).expect("claim")
        );
        for entry in audit
            .iter()
            .filter(|e| format!("{:?}", e.event).contains(uid.as_str()))
        {
            let _ = writeln!(text, "  audit {entry:?}");
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_or_frozen_during_churn_fails_over_without_double_allocation() {
    let _churn = crate::chaos_support::one_churn_at_a_time().await;
    let seed = seed();
    let kills = env_number("DRA_FAILOVER_KILLS", 8);
    println!("chaos_failover: seed {seed}, {kills} leader failures");
    let started = Instant::now();
    let mut rng = Random::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let sim = SimProcess::start(
        dir.path(),
        &["--nodes", "4", "--devices-per-node", "4"].map(String::from),
    )
    .await;
    let client = sim.client().await;
    workload::setup(&client).await;
    let watcher = ClaimWatcher::start(&client);
    let mut replicas = [
        Replica::new("replica-0", dir.path(), sim.kubeconfig.clone()),
        Replica::new("replica-1", dir.path(), sim.kubeconfig.clone()),
    ];
    replicas[0].spawn();
    replicas[0].wait_status("ready", READY_TIMEOUT).await;
    replicas[1].spawn();
    replicas[1].wait_status("standby", READY_TIMEOUT).await;
    let churn = Churn::start(&client, ChurnConfig::default(), seed);

    let mut report = Report::default();
    let mut fenced = 0;
    for cycle in 0..kills {
        let leader = leader_index(&mut replicas).await;
        let work = Duration::from_millis(rng.between(500, 2500));
        replicas[leader].process().run_for(work).await;
        if cycle % 3 == 2 {
            fenced += freeze_leader(&mut replicas, leader, &mut report).await;
        } else {
            let problems = kill_leader(&mut replicas, leader, &client, &mut report).await;
            assert!(problems.is_empty(), "after failover {cycle}: {problems:#?}");
        }
        let observed = watcher.observed();
        assert_eq!(
            observed.violations, 0,
            "after failover {cycle}: {:#?}",
            observed.first_violations
        );
    }

    let counts = churn.stop().await;
    let leader = leader_index(&mut replicas).await;
    drain(&client, replicas[leader].process(), DRAIN_TIMEOUT).await;
    // The last leader hands over; the other reconciles its stale ledger before it is ready.
    let last = replicas[leader].process.take().expect("leader runs");
    let last_output = last.recent_output();
    assert!(last.terminate(Duration::from_secs(30)).await.success());
    let handover = replicas[1 - leader]
        .wait_status("ready", READY_TIMEOUT)
        .await;
    let other = replicas[1 - leader].process.take().expect("runs");
    let other_output = other.recent_output();
    assert!(other.terminate(Duration::from_secs(30)).await.success());
    let mut audits = Vec::new();
    for replica in &replicas {
        let left = leftovers(&replica.ledger);
        assert!(
            left.is_empty(),
            "{} (last leader: {}) holds after the drain:\n{left}\nlast leader's output:\n{last_output}\nother's output:\n{other_output}",
            replica.name,
            replicas[leader].name
        );
        let (verified, contents) = assert_drained(&replica.ledger);
        println!("{}: {verified}", replica.name);
        audits.push(contents.audit);
    }

    let observed = watcher.stop();
    report.allocations_observed = observed.allocated_uids.len();
    report.violations = observed.violations;
    report.created = (
        counts
            .claims_created
            .load(std::sync::atomic::Ordering::Relaxed),
        counts
            .pods_created
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    for audit in audits {
        for (kind, count) in audit {
            *report.audit.entry(kind).or_default() += count;
        }
    }
    println!("{report}");
    println!("writes refused by the fence of woken leaders: {fenced}");
    println!("handover on SIGTERM at the end: {handover:?}");
    println!(
        "chaos_failover took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(observed.violations, 0, "{:#?}", observed.first_violations);
    assert_eq!(report.total_kills(), kills);
    assert!(
        report.allocations_observed > 0,
        "the run allocated nothing: {report}"
    );
    sim.stop();
}
