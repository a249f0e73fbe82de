//! `dra-ledger sim` as a child process: the simulated cluster that the process-level tests run
//! `dra-ledger run` and `kubectl` against. Its stdout is read until it prints its URL (and on,
//! so the pipe never fills); its log goes to `sim.log` beside the kubeconfig.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::process::{signal, wait_exit, KillOnDrop, Lines, STARTUP};

/// A `dra-ledger sim`, serving; killed when dropped.
pub struct Sim {
    /// The process.
    pub child: KillOnDrop,
    /// The kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    /// The API server's URL.
    pub url: String,
    /// Its log file.
    pub log: PathBuf,
    _stdout: Lines,
}

impl Sim {
    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops it with SIGTERM, waits up to 30 s (then kills it) and returns its log.
    pub fn stop(mut self) -> String {
        signal(&self.child, "TERM");
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_exit(&mut self.child, Duration::from_secs(30))
        }));
        self.log_text()
    }
}

/// Starts `binary sim ARGS --kubeconfig-out DIR/kubeconfig` (ARGS: nodes, devices, faults, log
/// format), logging to `DIR/sim.log`; returns once it printed its URL.
pub fn start_sim(binary: impl AsRef<Path>, dir: &Path, args: &[&str]) -> Sim {
    let kubeconfig = dir.join("kubeconfig");
    let log = dir.join("sim.log");
    let log_file = std::fs::File::create(&log).expect("sim log file");
    let mut child = Command::new(binary.as_ref())
        .arg("sim")
        .args(args)
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .expect("dra-ledger sim starts");
    let mut stdout = Lines::stdout(&mut child);
    let child = KillOnDrop(child);
    let url = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stdout.wait_for(STARTUP, |line| {
            line.starts_with("http://").then(|| line.trim().to_owned())
        })
    }))
    .unwrap_or_else(|_| {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        panic!("dra-ledger sim printed no URL; its log:\n{text}")
    });
    Sim {
        child,
        kubeconfig,
        url,
        log,
        _stdout: stdout,
    }
}
