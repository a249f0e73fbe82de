//! Crash test with a real process: a child allocating, confirming (waiting for the commit, or
//! deferred, so that commits without a sync are among those a kill interrupts) and releasing in a
//! loop is killed with SIGKILL at random moments. After every kill the file reopens, `verify()`
//! passes, every allocation the child reported as returned is present with its devices, every
//! confirmation it reported as returned is still there, and every release it reported as done is
//! absent.
//!
//! The child is this test binary re-executed with `DRA_CRASH_CHILD=<ledger path>`, running the
//! ignored `crash_child` entry. It reports over its stdout pipe, one line per completed call:
//! `A <uid> <node> <dev,dev>` after an allocation returned, `C <uid>` after a confirmation returned,
//! `r <uid>` before a release is asked for (from then on the claim may or may not be allocated) and
//! `R <uid>` after the release returned.
//! `DRA_CRASH_KILLS` sets the number of kills (default 30).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use dra_allocator::ledger::{
    AllocationQuery, AllocationState, Ledger, LedgerError, LedgerOptions, PodClaimRequest,
};
use dra_allocator::model::Sharing;
use rand::Rng;
use testkit::ledger::*;

const CHILD_ENV: &str = "DRA_CRASH_CHILD";
const NODES: [&str; 4] = ["node-0", "node-1", "node-2", "node-3"];

fn kills() -> usize {
    std::env::var("DRA_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

/// The child role: loops until killed. Not a test on its own.
#[test]
#[ignore = "child role of crash_kill_loop; runs only when re-executed with DRA_CRASH_CHILD"]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    // Deferred writes are committed at once, unsynced, when nothing else is queued: the kills
    // then land among commits without a sync as often as among synced ones.
    let options = LedgerOptions {
        defer_limit: Duration::ZERO,
        ..LedgerOptions::default()
    };
    let ledger = Ledger::open_with(&path, DRIVER, options).expect("child opens the ledger");
    if ledger.nodes().unwrap().is_empty() {
        for node in NODES {
            ledger.set_inventory(node, gpus(8, "H100")).unwrap();
        }
    }
    let mut held: Vec<String> = ledger
        .allocations(&AllocationQuery {
            limit: 10_000,
            ..AllocationQuery::default()
        })
        .unwrap()
        .items
        .into_iter()
        .map(|a| a.claim.uid)
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").unwrap();
    let mut rng = rand::rng();
    let pid = std::process::id();
    for n in 0u64.. {
        let choice = rng.random_range(0..10);
        if held.len() < 20 && choice < 5 {
            let uid = format!("{pid}-{n}");
            let sharing = if rng.random_bool(0.3) {
                Sharing::Shared { max_consumers: 2 }
            } else {
                Sharing::Exclusive
            };
            let count = rng.random_range(1..=2);
            match ledger.allocate(allocate(&uid, None, request(count, sharing))) {
                Ok(a) => {
                    writeln!(out, "A {uid} {} {}", a.node, a.devices.join(",")).unwrap();
                    held.push(uid);
                }
                Err(LedgerError::Unsatisfiable { .. }) => {}
                Err(error) => panic!("child allocate failed: {error}"),
            }
        } else if held.len() < 20 && choice < 6 {
            let node = NODES[rng.random_range(0..NODES.len())];
            let claims: Vec<PodClaimRequest> = (0..2)
                .map(|i| pod_claim(&format!("{pid}-{n}-{i}"), request(1, Sharing::Exclusive)))
                .collect();
            if let Ok(done) = ledger.allocate_pod(&format!("pod-{pid}-{n}"), node, claims) {
                for a in done {
                    writeln!(out, "A {} {} {}", a.claim.uid, a.node, a.devices.join(",")).unwrap();
                    held.push(a.claim.uid);
                }
            }
        } else if choice < 7 && !held.is_empty() {
            let uid = &held[rng.random_range(0..held.len())];
            if rng.random_bool(0.5) {
                ledger.confirm(uid).unwrap();
                writeln!(out, "C {uid}").unwrap();
            } else {
                let a = ledger.allocation(uid).unwrap().unwrap();
                ledger.confirm_deferred(uid, &a.node, &a.devices).unwrap();
            }
        } else if !held.is_empty() {
            let uid = held.swap_remove(rng.random_range(0..held.len()));
            writeln!(out, "r {uid}").unwrap();
            ledger.release(&uid).unwrap();
            writeln!(out, "R {uid}").unwrap();
        }
    }
}

#[derive(Default)]
struct Reported {
    /// Allocations that returned and whose release was not asked for: must be present.
    allocated: BTreeMap<String, (String, Vec<String>)>,
    /// Confirmations that returned, of allocations still held: must stay confirmed.
    confirmed: BTreeSet<String>,
    /// Releases that returned: must be absent.
    released: BTreeSet<String>,
}

impl Reported {
    fn apply(&mut self, line: &str) {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["A", uid, node, devices] => {
                let devices = devices.split(',').map(str::to_owned).collect();
                self.allocated
                    .insert((*uid).to_owned(), ((*node).to_owned(), devices));
            }
            ["C", uid] => {
                self.confirmed.insert((*uid).to_owned());
            }
            ["r", uid] => {
                self.allocated.remove(*uid);
                self.confirmed.remove(*uid);
            }
            ["R", uid] => {
                self.allocated.remove(*uid);
                self.confirmed.remove(*uid);
                self.released.insert((*uid).to_owned());
            }
            _ => {}
        }
    }
}

/// Starts the child, lets it work for `run`, kills it, and returns the lines it completed.
fn run_child_until_killed(path: &Path, run: Duration) -> Vec<String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_kill::crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    // Wait until the child has opened the ledger, then give it `run` before the kill.
    let started = std::time::Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "child did not become ready"
        );
        match lines_rx.recv_timeout(Duration::from_secs(30)) {
            // libtest may print the test name on the same line before the child's output.
            Ok(line) if line.ends_with("READY") => break,
            Ok(line) => lines.push(line),
            Err(error) => panic!("child did not become ready: {error}"),
        }
    }
    std::thread::sleep(run);
    child.kill().expect("SIGKILL the child");
    child.wait().unwrap();
    reader.join().unwrap();
    // Only complete lines count: the reader drops a final partial line without a newline.
    lines.extend(lines_rx.try_iter());
    lines
}

#[test]
fn crash_kill_loop_keeps_every_reported_allocation_and_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    let mut reported = Reported::default();
    let mut rng = rand::rng();
    let mut completed_lines = 0;
    for kill in 0..kills() {
        let run = Duration::from_millis(rng.random_range(5..80));
        for line in run_child_until_killed(&path, run) {
            completed_lines += 1;
            reported.apply(&line);
        }

        let ledger = Ledger::open(&path, DRIVER)
            .unwrap_or_else(|e| panic!("reopen after kill {kill} failed: {e}"));
        let report = ledger.verify().unwrap();
        assert!(
            report.is_consistent(),
            "after kill {kill}: {:#?}",
            report.problems
        );
        for (uid, (node, devices)) in &reported.allocated {
            let found = ledger.allocation(uid).unwrap().unwrap_or_else(|| {
                panic!("after kill {kill}: reported allocation {uid} is missing")
            });
            assert_eq!(
                (&found.node, &found.devices),
                (node, devices),
                "claim {uid}"
            );
        }
        for uid in &reported.confirmed {
            let state = ledger.allocation(uid).unwrap().map(|a| a.state);
            assert_eq!(
                state,
                Some(AllocationState::Confirmed),
                "after kill {kill}: reported confirmation of {uid} was lost"
            );
        }
        for uid in &reported.released {
            assert!(
                ledger.allocation(uid).unwrap().is_none(),
                "after kill {kill}: reported release of {uid} was lost"
            );
        }
        for pending in ledger.pending_intents().unwrap() {
            assert!(ledger.allocation(&pending.claim.uid).unwrap().is_some());
        }
    }
    eprintln!(
        "{} kills, {completed_lines} completed calls reported",
        kills()
    );
    assert!(
        completed_lines > kills(),
        "the child completed too little work to prove anything: {completed_lines} calls"
    );
}
