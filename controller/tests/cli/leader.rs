//! Leader election between two `dra-ledger run` processes against `dra-ledger sim`: one leads and
//! the other waits as a ready standby; a killed leader is replaced once its lease expires; a
//! leader stopped with SIGTERM releases the lease so the standby takes over at once; a leader
//! that was frozen past its lease finds it lost when it wakes, writes nothing more and exits
//! non-zero.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::cli_support::{
    controller_addr, http_get, signal, spawn_replica, start_sim, wait_exit, Lines,
};

struct Replica {
    child: Child,
    logs: Lines,
    addr: String,
    ledger: PathBuf,
}

impl Replica {
    fn start(dir: &Path, kubeconfig: &Path, identity: &str) -> Replica {
        let ledger = dir.join(format!("ledger-{identity}.redb"));
        let mut child = spawn_replica(kubeconfig, &ledger, "127.0.0.1:0", identity, &[]);
        let mut logs = Lines::new(child.stderr.take().unwrap());
        let addr = controller_addr(&mut logs);
        Replica {
            child,
            logs,
            addr,
            ledger,
        }
    }

    /// Waits until `/readyz` answers 200 with `status`; returns how long that took.
    fn wait_status(&self, status: &str, timeout: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let (code, body) = http_get(&self.addr, "/readyz");
            if code == 200 && body.contains(&format!("\"status\":\"{status}\"")) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < timeout,
                "not {status} within {timeout:?}: {code} {body}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn metric(&self, name: &str) -> Option<f64> {
        let (_, text) = http_get(&self.addr, "/metrics");
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .and_then(|value| value.trim().parse().ok())
    }
}

fn lease_holder(kubeconfig: &Path) -> String {
    let output = Command::new("kubectl")
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "get",
            "lease",
            "gpu.dra-ledger.io",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .output();
    match output {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        }
        // Without kubectl the holder is read from the replicas' own metrics instead.
        _ => String::from("?"),
    }
}

fn verify(ledger: &Path) {
    let verified = crate::cli_support::binary()
        .args(["ledger", "verify", "--ledger", ledger.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
}

#[test]
fn one_replica_leads_and_a_killed_or_stopped_leader_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = start_sim(dir.path());
    let kubeconfig = sim.kubeconfig.clone();

    let mut a = Replica::start(dir.path(), &kubeconfig, "replica-a");
    a.wait_status("ready", Duration::from_secs(60));
    let mut b = Replica::start(dir.path(), &kubeconfig, "replica-b");
    b.wait_status("standby", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(3));
    b.wait_status("standby", Duration::from_secs(1));
    assert_eq!(a.metric("dra_ledger_leader"), Some(1.0));
    assert_eq!(b.metric("dra_ledger_leader"), Some(0.0));
    let holder = lease_holder(&kubeconfig);
    assert!(holder == "replica-a" || holder == "?", "{holder}");

    // A killed leader cannot release: the standby waits for the lease to expire.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let takeover = b.wait_status("ready", Duration::from_secs(30));
    eprintln!("takeover after kill -9: {takeover:?}");
    assert!(
        takeover >= Duration::from_millis(1500),
        "took over before the lease could expire: {takeover:?}"
    );
    b.logs.wait_for(Duration::from_secs(5), |line| {
        (line.contains("Acquired the leader lease") && line.contains("replica-a")).then_some(())
    });
    verify(&a.ledger);

    // The killed replica comes back as a standby.
    let mut a = Replica::start(dir.path(), &kubeconfig, "replica-a");
    a.wait_status("standby", Duration::from_secs(60));

    // SIGTERM: the leader stops its work, then releases the lease; no expiry to wait for.
    signal(&b.child, "TERM");
    let released_at = Instant::now();
    let status = wait_exit(&mut b.child, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    b.logs.drain();
    assert!(
        b.logs
            .seen
            .iter()
            .any(|l| l.contains("Released the leader lease")),
        "{}",
        b.logs.seen.join("\n")
    );
    a.wait_status("ready", Duration::from_secs(30));
    let handover = released_at.elapsed();
    eprintln!("handover after SIGTERM: {handover:?}");
    verify(&b.ledger);

    signal(&a.child, "TERM");
    assert!(wait_exit(&mut a.child, Duration::from_secs(30)).success());
    verify(&a.ledger);
    signal(&sim.child, "TERM");
    assert!(wait_exit(&mut sim.child, Duration::from_secs(30)).success());
}

#[test]
fn a_leader_frozen_past_its_lease_stops_writing_and_exits_when_it_wakes() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = start_sim(dir.path());
    let kubeconfig = sim.kubeconfig.clone();
    let mut a = Replica::start(dir.path(), &kubeconfig, "replica-a");
    a.wait_status("ready", Duration::from_secs(60));
    let mut b = Replica::start(dir.path(), &kubeconfig, "replica-b");
    b.wait_status("standby", Duration::from_secs(60));

    signal(&a.child, "STOP");
    b.wait_status("ready", Duration::from_secs(30));
    signal(&a.child, "CONT");
    let status = wait_exit(&mut a.child, Duration::from_secs(30));
    a.logs.drain();
    let logs = a.logs.seen.join("\n");
    assert_eq!(status.code(), Some(1), "{logs}");
    assert!(logs.contains("lost the leader lease"), "{logs}");
    assert!(!logs.contains("Released the leader lease"), "{logs}");
    verify(&a.ledger);
    assert_eq!(b.metric("dra_ledger_leader"), Some(1.0));

    signal(&b.child, "TERM");
    assert!(wait_exit(&mut b.child, Duration::from_secs(30)).success());
    signal(&sim.child, "TERM");
    assert!(wait_exit(&mut sim.child, Duration::from_secs(30)).success());
}

#[test]
fn a_second_process_under_the_same_identity_makes_the_first_step_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = start_sim(dir.path());
    let kubeconfig = sim.kubeconfig.clone();
    let first_dir = dir.path().join("first");
    let second_dir = dir.path().join("second");
    std::fs::create_dir_all(&first_dir).unwrap();
    std::fs::create_dir_all(&second_dir).unwrap();
    let mut first = Replica::start(&first_dir, &kubeconfig, "replica-a");
    first.wait_status("ready", Duration::from_secs(60));
    // The same identity continues its own lease at once (a restart of the same pod)...
    let mut second = Replica::start(&second_dir, &kubeconfig, "replica-a");
    second.wait_status("ready", Duration::from_secs(60));
    // ...and the first, seeing its lease renewed by someone else, stops.
    let status = wait_exit(&mut first.child, Duration::from_secs(30));
    first.logs.drain();
    let logs = first.logs.seen.join("\n");
    assert_eq!(status.code(), Some(1), "{logs}");
    assert!(
        logs.contains("another process under the identity replica-a"),
        "{logs}"
    );
    verify(&first.ledger);

    signal(&second.child, "TERM");
    assert!(wait_exit(&mut second.child, Duration::from_secs(30)).success());
    signal(&sim.child, "TERM");
    assert!(wait_exit(&mut sim.child, Duration::from_secs(30)).success());
}
