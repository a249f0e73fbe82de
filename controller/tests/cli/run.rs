//! `dra-ledger run` against `dra-ledger sim` through a kubeconfig: becomes ready, exposes the
//! inventory in its metrics, and exits 0 on SIGTERM with a consistent ledger. A corrupt ledger
//! stops it at start with a clear error.

use std::time::{Duration, Instant};

use crate::cli_support::{
    controller_addr, http_get, spawn, start_sim, terminate, wait_exit, Lines,
};

fn wait_ready(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = http_get(addr, "/readyz");
        // Until it holds the leader lease the process is a ready standby.
        if status == 200 && body.contains("\"status\":\"ready\"") {
            return;
        }
        if status != 200 {
            assert_eq!(status, 503, "{body}");
            assert!(body.contains("\"code\":\"not_ready\""), "{body}");
        }
        assert!(Instant::now() < deadline, "not ready within 60s: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn run_against_the_simulator_gets_ready_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.redb");
    let mut sim = start_sim(dir.path());
    let kubeconfig = sim.kubeconfig.clone();

    let mut run = spawn(&[
        "run",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--ledger",
        ledger.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--log-format",
        "json",
    ]);
    let mut logs = Lines::new(run.stderr.take().unwrap());
    let addr = controller_addr(&mut logs);
    wait_ready(&addr);
    let (status, metrics) = http_get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("dra_ledger_devices{state=\"free\"} 4"),
        "{metrics}"
    );

    terminate(&run);
    let status = wait_exit(&mut run, Duration::from_secs(30));
    logs.drain();
    assert!(
        status.success(),
        "exit {status:?}\n{}",
        logs.seen.join("\n")
    );
    assert!(
        logs.seen
            .iter()
            .any(|line| line.contains("Stopped cleanly")),
        "{}",
        logs.seen.join("\n")
    );
    let verified = crate::cli_support::binary()
        .args(["ledger", "verify", "--ledger", ledger.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{stdout}");
    assert!(stdout.contains("consistent: 4 devices"), "{stdout}");

    terminate(&sim.child);
    assert!(wait_exit(&mut sim.child, Duration::from_secs(30)).success());
}

#[test]
fn run_with_a_corrupt_ledger_fails_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n",
    )
    .unwrap();
    let ledger = dir.path().join("ledger.redb");
    std::fs::write(&ledger, vec![0x5a; 4096]).unwrap();
    let output = crate::cli_support::binary()
        .args([
            "run",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--ledger",
            ledger.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: cannot open the ledger")
            && last.contains(ledger.to_str().unwrap())
            && last.contains("corrupt or not a redb database"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&ledger).unwrap(), vec![0x5a; 4096]);
}

#[test]
fn run_with_an_unreadable_admin_token_file_fails_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("token");
    let output = crate::cli_support::binary()
        .args([
            "run",
            "--admin-token-file",
            missing.to_str().unwrap(),
            "--ledger",
            dir.path().join("ledger.redb").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot read admin token file"), "{stderr}");
    assert!(!dir.path().join("ledger.redb").exists());
}

#[test]
fn run_with_a_rollup_age_not_below_the_history_retention_fails_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.redb");
    let output = crate::cli_support::binary()
        .args([
            "run",
            "--history-retention",
            "30d",
            "--history-rollup-after",
            "30d",
            "--ledger",
            ledger.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "--history-rollup-after (30d) must be shorter than --history-retention (30d)"
        ),
        "{stderr}"
    );
    assert!(!ledger.exists());
}
