//! The processes of the benchmark: `dra-ledger sim` and `dra-ledger run` as children, what
//! `/proc` says about them (resident memory, CPU time), a Kubernetes client of the simulator, the
//! admin API's `/readyz` and `/metrics`, and percentiles.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::process::{started_line_addr, KillOnDrop, Lines, STARTUP};
use testkit::sim::{start_sim, Sim};

use crate::e2e_support::DRIVER;

/// The `dra-ledger` binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_dra-ledger")
}

/// Starts `dra-ledger sim` on 1.30 with `nodes` x `devices` in `dir`.
pub fn sim(dir: &Path, nodes: usize, devices: usize) -> Sim {
    let (nodes, devices) = (nodes.to_string(), devices.to_string());
    start_sim(
        binary(),
        dir,
        &[
            "--nodes",
            &nodes,
            "--devices-per-node",
            &devices,
            "--kubernetes-version",
            "1.30",
            "--log-format",
            "json",
        ],
    )
}

/// A Kubernetes client of the simulator at `url`.
pub fn client(url: &str) -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::new(url.parse()?);
    config.default_namespace = "default".into();
    config.read_timeout = Some(Duration::from_secs(120));
    Ok(kube::Client::try_from(config)?)
}

/// Resident memory of a process, from `/proc/<pid>/status`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    /// `VmRSS`: resident now, KiB.
    pub rss_kib: u64,
    /// `VmHWM`: the most that was ever resident, KiB.
    pub hwm_kib: u64,
}

impl Memory {
    /// Reads process `pid`'s figures (zero where procfs is not available).
    pub fn of(pid: u32) -> Memory {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse().ok())
                .unwrap_or(0)
        };
        Memory {
            rss_kib: field("VmRSS:"),
            hwm_kib: field("VmHWM:"),
        }
    }
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// User plus system CPU time of process `pid`, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> Duration {
    // Clock ticks per second of utime/stime; 100 on every Linux platform this runs on.
    const TICKS_PER_SECOND: u64 = 100;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // The fields after the command name, which is in parentheses and may hold spaces; utime and
    // stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let Some(rest) = stat.rfind(')').map(|at| &stat[at + 2..]) else {
        return Duration::ZERO;
    };
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    Duration::from_millis(fields.iter().sum::<u64>() * 1000 / TICKS_PER_SECOND)
}

/// A `dra-ledger run` child: the process, its log and its admin address.
pub struct Controller {
    /// The process, killed when dropped.
    pub child: KillOnDrop,
    /// The admin API's `host:port`.
    pub addr: String,
    /// When it was spawned.
    pub spawned: Instant,
    /// From the spawn to its "Ledger open" log line.
    pub ledger_open: Duration,
    /// From the spawn to its "Controller started" log line.
    pub started: Duration,
    log: Lines,
}

/// The message of a JSON log line, if it is one.
fn message(line: &str) -> Option<String> {
    let entry: serde_json::Value = serde_json::from_str(line).ok()?;
    entry["fields"]["message"].as_str().map(str::to_owned)
}

impl Controller {
    /// Spawns `dra-ledger run` on `ledger` against the cluster of `kubeconfig` (v1alpha2, no
    /// leader election, admin API on a free loopback port) and waits for its "Controller
    /// started" line.
    pub fn start(kubeconfig: &Path, ledger: &Path) -> Controller {
        let mut child = Command::new(binary())
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--ledger")
            .arg(ledger)
            .args(["--listen", "127.0.0.1:0", "--leader-elect=false"])
            .args(["--dra-api", "v1alpha2", "--log-format", "json"])
            .args(["--driver-name", DRIVER])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dra-ledger run starts");
        let spawned = Instant::now();
        let mut log = Lines::stderr(&mut child);
        let child = KillOnDrop(child);
        log.wait_for(STARTUP, |line| {
            (message(line).as_deref() == Some("Ledger open")).then_some(())
        });
        let ledger_open = spawned.elapsed();
        let addr = log.wait_for(STARTUP, started_line_addr);
        let started = spawned.elapsed();
        Controller {
            child,
            addr,
            spawned,
            ledger_open,
            started,
            log,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Polls `/readyz` every 10 ms until it answers 200; the time from the spawn.
    pub fn wait_ready(&mut self, timeout: Duration) -> Duration {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(answer) = testkit::process::try_http_request(&self.addr, "GET", "/readyz") {
                if answer.status == 200 {
                    return self.spawned.elapsed();
                }
            }
            self.log.pump();
            assert!(
                Instant::now() < deadline,
                "dra-ledger run not ready after {timeout:?}; its log:\n{}",
                self.log.text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The text of `/metrics`.
    pub fn metrics(&self) -> String {
        testkit::process::try_http_request(&self.addr, "GET", "/metrics")
            .map(|answer| answer.body)
            .unwrap_or_default()
    }

    /// Stops it with SIGTERM and waits for it to exit.
    pub fn stop(mut self) {
        testkit::process::terminate(&self.child);
        testkit::process::wait_exit(&mut self.child, Duration::from_secs(60));
    }
}

/// The value of the sample `name` (with its labels, as written) in a Prometheus text page.
pub fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// The `q` quantile (0 to 1) of histogram `name` in a Prometheus text page, interpolated
/// linearly within the bucket that holds it, as `histogram_quantile` does; `None` when empty.
pub fn histogram_quantile(metrics: &str, name: &str, q: f64) -> Option<Duration> {
    let prefix = format!("{name}_bucket{{le=\"");
    let buckets: Vec<(f64, f64)> = metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(&prefix)?;
            let (bound, count) = rest.split_once("\"} ")?;
            let bound = if bound == "+Inf" {
                f64::INFINITY
            } else {
                bound.parse().ok()?
            };
            Some((bound, count.trim().parse().ok()?))
        })
        .collect();
    let total = buckets.last()?.1;
    if total == 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(bound, count) in &buckets {
        if count >= rank {
            if bound.is_infinite() {
                return Some(Duration::from_secs_f64(lower));
            }
            let share = if count > below {
                (rank - below) / (count - below)
            } else {
                1.0
            };
            return Some(Duration::from_secs_f64(lower + (bound - lower) * share));
        }
        (lower, below) = (bound, count);
    }
    None
}

/// Milliseconds with one decimal.
pub fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// A fresh directory for one run, kept until the process ends.
pub fn run_dir() -> PathBuf {
    tempfile::tempdir().expect("a temporary directory").keep()
}
