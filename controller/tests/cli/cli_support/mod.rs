//! Helpers of the binary's tests: the testkit's process helpers bound to the test-built
//! `dra-ledger`.

#![allow(dead_code, unused_imports)]

use std::path::Path;
use std::process::{Child, Command};

pub use testkit::process::{
    controller_addr, http_get, signal, terminate, wait_exit, wait_leading, Demo, KillOnDrop, Lines,
};
pub use testkit::sim::Sim;

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_dra-ledger");

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
