//! The admin token never reaches the log, even at `RUST_LOG=debug`: `dra-ledger demo` and
//! `dra-ledger run` (against `dra-ledger sim`) serve requests with the right token, a wrong one
//! that starts with it, and none, for every protected endpoint; the whole of their stdout and
//! stderr is then searched for the token. The log must hold debug entries, so the test proves the
//! level took effect.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::cli_support::{stdout_lines, wait_exit, Lines};

const TOKEN: &str = "tok3n-that-must-not-be-logged-81f2";

/// One HTTP/1.1 request on `addr`; the status and the body bytes.
fn request(addr: &str, method: &str, path: &str, auth: Option<&str>, body: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).expect("admin server accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let auth = auth.map_or_else(String::new, |a| format!("Authorization: {a}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&response[..head_end]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    (status, response[head_end + 4..].to_vec())
}

/// Cordon, uncordon, reconcile and backup with the token, a longer wrong one and none.
fn exercise_protected_endpoints(addr: &str) {
    // The inventory reaches the ledger from the ResourceSlices shortly after the start.
    let deadline = Instant::now() + Duration::from_secs(60);
    let node = loop {
        let (status, nodes) = request(addr, "GET", "/v1/nodes", None, "");
        assert_eq!(status, 200);
        let nodes: serde_json::Value = serde_json::from_slice(&nodes).unwrap();
        if let Some(node) = nodes["items"][0]["name"].as_str() {
            break node.to_owned();
        }
        assert!(Instant::now() < deadline, "no node in the ledger: {nodes}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let (_, devices) = request(addr, "GET", &format!("/v1/nodes/{node}/devices"), None, "");
    let devices: serde_json::Value = serde_json::from_slice(&devices).unwrap();
    let device = devices["items"][0]["name"]
        .as_str()
        .expect("a device")
        .to_owned();
    let right = format!("Bearer {TOKEN}");
    let wrong = format!("Bearer {TOKEN}-but-longer");
    let cordon = format!("/v1/nodes/{node}/devices/{device}/cordon");
    let uncordon = format!("/v1/nodes/{node}/devices/{device}/uncordon");
    assert_eq!(request(addr, "POST", &cordon, Some(&wrong), "").0, 401);
    assert_eq!(request(addr, "POST", &cordon, None, "").0, 401);
    assert_eq!(request(addr, "POST", &cordon, Some(&right), "").0, 200);
    assert_eq!(request(addr, "POST", &uncordon, Some(&right), "").0, 200);
    assert_eq!(
        request(addr, "POST", "/v1/reconcile", Some(&wrong), "").0,
        401
    );
    let reconcile = request(addr, "POST", "/v1/reconcile", Some(&right), "").0;
    assert!(reconcile == 200 || reconcile == 409, "{reconcile}");
    assert_eq!(request(addr, "GET", "/v1/backup", Some(&wrong), "").0, 401);
    let (status, backup) = request(addr, "GET", "/v1/backup", Some(&right), "");
    assert_eq!(status, 200);
    assert!(!backup.is_empty());
}

/// Fails if any line has the token, or if no line is a debug entry.
fn assert_token_absent(lines: &[String], what: &str) {
    let leaked: Vec<&String> = lines.iter().filter(|l| l.contains(TOKEN)).collect();
    assert!(leaked.is_empty(), "{what} logged the token:\n{leaked:#?}");
    let debug = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|entry| entry["level"] == "DEBUG")
        .count();
    assert!(
        debug > 0,
        "{what}: no debug entries, RUST_LOG=debug had no effect"
    );
}

#[test]
fn demo_at_debug_level_never_logs_the_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let mut demo = crate::cli_support::binary()
        .args([
            "demo",
            "--nodes",
            "1",
            "--devices-per-node",
            "2",
            "--pods",
            "200",
            "--duration",
            "120s",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--admin-token-file",
            token.to_str().unwrap(),
        ])
        .env("RUST_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = stdout_lines(&mut demo);
    let mut logs = Lines::new(demo.stderr.take().unwrap());
    let addr = out.wait_for(Duration::from_secs(60), testkit::process::demo_banner_addr);
    out.wait_for(Duration::from_secs(60), |line| {
        line.contains("controller ready").then_some(())
    });
    exercise_protected_endpoints(&addr);
    crate::cli_support::signal(&demo, "INT");
    let status = wait_exit(&mut demo, Duration::from_secs(60));
    out.drain();
    logs.drain();
    assert!(status.success(), "exit {status:?}");
    assert_token_absent(&[out.seen.clone(), logs.seen.clone()].concat(), "demo");
}

#[test]
fn run_at_debug_level_never_logs_the_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let mut sim = crate::cli_support::start_sim(dir.path());
    let kubeconfig = sim.kubeconfig.clone();
    let mut run = crate::cli_support::run_with_token(&kubeconfig, dir.path(), &token)
        .env("RUST_LOG", "debug")
        .spawn()
        .unwrap();
    let mut out = stdout_lines(&mut run);
    let mut logs = Lines::new(run.stderr.take().unwrap());
    let addr = crate::cli_support::controller_addr(&mut logs);
    crate::cli_support::wait_leading(&addr, Duration::from_secs(60));
    exercise_protected_endpoints(&addr);
    crate::cli_support::terminate(&run);
    let status = wait_exit(&mut run, Duration::from_secs(30));
    out.drain();
    logs.drain();
    assert!(status.success(), "exit {status:?}");
    assert_token_absent(&[out.seen.clone(), logs.seen.clone()].concat(), "run");
    crate::cli_support::terminate(&sim.child);
    assert!(wait_exit(&mut sim.child, Duration::from_secs(30)).success());
}
