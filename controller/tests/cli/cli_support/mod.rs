//! Helpers of the binary's tests: the testkit's process helpers bound to the test-built
//! `dra-ledger`.

#![allow(dead_code, unused_imports)]

pub mod agent;

use std::path::Path;
use std::process::{Child, Command};

use dra_allocator::ledger::{AllocateRequest, ClaimRef, Ledger};
use dra_allocator::model::{ClassDefaults, Device, EffectiveRequest};

pub use testkit::process::{
    controller_addr, http_get, signal, terminate, wait_exit, wait_leading, Demo, KillOnDrop, Lines,
};
pub use testkit::sim::Sim;

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_dra-ledger");

/// The driver name of the ledgers the tests write.
pub const DRIVER: &str = "gpu.dra-ledger.io";

/// The binary under test, as a command to complete.
pub fn binary() -> Command {
    Command::new(BINARY)
}

/// Spawns the binary with `args`, stdout and stderr piped.
pub fn spawn(args: &[&str]) -> Child {
    testkit::process::spawn(BINARY, args)
}

/// Spawns `dra-ledger run` as one replica with leader election against `kubeconfig`: its own
/// ledger file, admin server on `listen`, 2 workers, JSON logs, the Lease identity `identity`
/// and the short lease of [`testkit::process::SHORT_LEASE_ARGS`]; `extra` flags after those.
pub fn spawn_replica(
    kubeconfig: &Path,
    ledger: &Path,
    listen: &str,
    identity: &str,
    extra: &[&str],
) -> Child {
    let mut args = vec![
        "run",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--ledger",
        ledger.to_str().unwrap(),
        "--listen",
        listen,
        "--workers",
        "2",
        "--log-format",
        "json",
        "--leader-elect-identity",
        identity,
    ];
    args.extend(testkit::process::SHORT_LEASE_ARGS);
    args.extend(extra);
    spawn(&args)
}

/// Stdout of `child` as lines.
pub fn stdout_lines(child: &mut Child) -> Lines {
    Lines::stdout(child)
}

/// Starts `dra-ledger sim` (2 nodes x 2 devices) writing its kubeconfig into `dir`; returns once
/// it printed its URL.
pub fn start_sim(dir: &Path) -> Sim {
    testkit::sim::start_sim(BINARY, dir, &["--nodes", "2", "--devices-per-node", "2"])
}

/// Starts `dra-ledger demo ARGS`; returns once it is ready, with its admin address.
pub fn start_demo(args: &[&str]) -> Demo {
    testkit::process::start_demo(BINARY, args)
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path as an argument.
pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Writes a ledger at `path` with four devices on each of `node-0` and `node-1` and two
/// allocations on `node-1`, `uid-a` confirmed and `uid-b` pending, and closes it.
pub fn populated_ledger(path: &Path) {
    let ledger = Ledger::open(path, DRIVER).unwrap();
    for node in ["node-0", "node-1"] {
        let devices = (0..4).map(|i| Device::new(format!("gpu-{i}"))).collect();
        ledger.set_inventory(node, devices).unwrap();
    }
    let request = EffectiveRequest::from_class(&ClassDefaults::default()).unwrap();
    for uid in ["uid-a", "uid-b"] {
        ledger
            .allocate(AllocateRequest {
                claim: ClaimRef::new(uid, "team", format!("claim-{uid}")),
                pod_uid: None,
                request: request.clone(),
                node: Some("node-1".to_owned()),
            })
            .unwrap();
    }
    ledger.confirm("uid-a").unwrap();
}

/// `dra-ledger run` against `kubeconfig`, with its ledger in `dir`, the admin bearer token read
/// from `token`, JSON logs and the admin server on a free port; stdout and stderr piped. Not
/// started: the caller may add to it.
pub fn run_with_token(kubeconfig: &Path, dir: &Path, token: &Path) -> Command {
    let ledger = dir.join("ledger.redb");
    let mut command = binary();
    command
        .args([
            "run",
            "--kubeconfig",
            path_str(kubeconfig),
            "--ledger",
            path_str(&ledger),
            "--listen",
            "127.0.0.1:0",
            "--admin-token-file",
            path_str(token),
            "--log-format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}
