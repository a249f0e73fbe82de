//! One controller as a `dra-ledger run` child process: its own ledger file, `--listen
//! 127.0.0.1:0` (the address is read from its "Controller started" log line), extra flags, and
//! failpoints armed through `DRA_LEDGER_FAILPOINTS`. Its stderr is read on a thread; the last
//! lines are kept for failure messages. Killed with SIGKILL ([`ControllerProcess::kill`]) or
//! stopped with SIGTERM ([`ControllerProcess::terminate`]); a dropped process is killed.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

/// How many log lines of a process are kept for failure messages.
const KEPT_LINES: usize = 300;

/// What a controller process is started with.
#[derive(Clone, Debug)]
pub struct ControllerSpec {
    /// The simulator's kubeconfig.
    pub kubeconfig: PathBuf,
    /// This controller's ledger file.
    pub ledger: PathBuf,
    /// More `run` flags (e.g. `--workers 4`, leader election).
    pub extra_args: Vec<String>,
}

/// What a process did while the harness waited for it to become ready.
#[derive(Clone, Debug, PartialEq)]
pub enum Startup {
    /// `/readyz` answered 200 this long after the spawn.
    Ready(Duration),
    /// It paused at this failpoint before it was ready.
    Frozen(String),
}

/// A running `dra-ledger run`.
pub struct ControllerProcess {
    child: Option<Child>,
    pid: u32,
    spawned: Instant,
    lines: UnboundedReceiver<String>,
    recent: VecDeque<String>,
    addr: Option<String>,
    failpoint: Option<String>,
}

impl ControllerProcess {
    /// Spawns `dra-ledger run` for `spec`, with `failpoints` (e.g. `group_commit@2`) armed.
    pub fn spawn(spec: &ControllerSpec, failpoints: Option<&str>) -> ControllerProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_dra-ledger"));
        command
            .arg("run")
            .arg("--kubeconfig")
            .arg(&spec.kubeconfig)
            .arg("--ledger")
            .arg(&spec.ledger)
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .args(&spec.extra_args)
            .env_remove(dra_allocator::failpoint::ENV)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(points) = failpoints {
            command.env(dra_allocator::failpoint::ENV, points);
        }
        let mut child = command.spawn().expect("dra-ledger run starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let (sender, lines) = unbounded_channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        ControllerProcess {
            pid: child.id(),
            child: Some(child),
            spawned: Instant::now(),
            lines,
            recent: VecDeque::new(),
            addr: None,
            failpoint: None,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The admin server's address, once its start line was read.
    pub fn addr(&self) -> Option<&str> {
        self.addr.as_deref()
    }

    /// The failpoint it paused at, once its line was read.
    pub fn failpoint(&self) -> Option<&str> {
        self.failpoint.as_deref()
    }

    /// The last lines of its output.
    pub fn recent_output(&self) -> String {
        self.recent.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    fn take(&mut self, line: String) {
        if let Some(rest) = line.strip_prefix("FAILPOINT ") {
            let name = rest.split_whitespace().next().unwrap_or_default();
            self.failpoint.get_or_insert_with(|| name.to_owned());
        } else if self.addr.is_none() {
            self.addr = testkit::process::started_line_addr(&line);
        }
        if self.recent.len() == KEPT_LINES {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }

    /// Reads the lines that arrived, without waiting.
    fn pump(&mut self) -> bool {
        let mut open = true;
        loop {
            match self.lines.try_recv() {
                Ok(line) => self.take(line),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => return open,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    open = false;
                    return open;
                }
            }
        }
    }

    /// Waits up to `timeout` for the next line; `false` when the output ended.
    async fn next_line(&mut self, timeout: Duration) -> bool {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Ok(Some(line)) => {
                self.take(line);
                true
            }
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// `GET /readyz`: the status code and body (`{"status":"ready"}` for the active allocator,
    /// `"standby"` for a replica without the leader lease), when the admin server answers.
    pub async fn readyz(&mut self) -> Option<(u16, String)> {
        self.pump();
        let addr = self.addr.clone()?;
        http_get(&addr, "/readyz").await
    }

    /// Waits until `/readyz` answers 200 as the active allocator (not as a standby) or the
    /// process pauses at a failpoint; panics with its output when neither happens within
    /// `timeout` or the process exits.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Startup {
        let deadline = Instant::now() + timeout;
        loop {
            let open = self.pump();
            if let Some(point) = &self.failpoint {
                return Startup::Frozen(point.clone());
            }
            if let Some(addr) = self.addr.clone() {
                if let Some((200, body)) = http_get(&addr, "/readyz").await {
                    if body.contains("\"ready\"") {
                        return Startup::Ready(self.spawned.elapsed());
                    }
                }
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            assert!(
                exited.is_none() && open,
                "controller exited ({exited:?}) before it was ready:\n{}",
                self.recent_output()
            );
            assert!(
                Instant::now() < deadline,
                "controller not ready within {timeout:?}:\n{}",
                self.recent_output()
            );
            self.next_line(Duration::from_millis(50)).await;
        }
    }

    /// Waits up to `timeout` for the process to pause at a failpoint; its name, or `None`.
    pub async fn wait_failpoint(&mut self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        while self.failpoint.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.next_line(left.min(Duration::from_millis(200))).await {
                break;
            }
        }
        self.pump();
        self.failpoint.clone()
    }

    /// Reads output for `duration` (so that a failpoint line is noticed), then returns.
    pub async fn run_for(&mut self, duration: Duration) {
        let deadline = Instant::now() + duration;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.next_line(left).await {
                return;
            }
        }
    }

    /// The body of `GET /metrics`, when the admin server answers.
    pub async fn metrics(&mut self) -> Option<String> {
        self.pump();
        let addr = self.addr.clone()?;
        match http_get(&addr, "/metrics").await {
            Some((200, body)) => Some(body),
            _ => None,
        }
    }

    /// The exit status, once the process has exited on its own.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.pump();
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// User plus system CPU time so far, from `/proc/PID/stat`.
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        Some(Duration::from_secs_f64(
            (utime + stime) as f64 / clock_ticks(),
        ))
    }

    /// Resident set size in KiB, from `/proc/PID/status`.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Kills it with SIGKILL and reaps it, so that its ledger file lock is gone.
    pub fn kill(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("process not yet reaped");
        let _ = child.kill();
        child.wait().expect("killed process is reaped")
    }

    /// Stops it with SIGTERM and waits up to `timeout` for it to exit; panics with its output
    /// if it does not exit in time.
    pub async fn terminate(mut self, timeout: Duration) -> ExitStatus {
        super::signal(self.pid, "TERM");
        let deadline = Instant::now() + timeout;
        loop {
            self.pump();
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "controller did not stop within {timeout:?}:\n{}",
                self.recent_output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Clock ticks per second of `/proc` CPU times (`getconf CLK_TCK`, else 100).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// `GET path` on `addr` with a 5 s limit; the status code and body, or `None` when there is no
/// answer.
pub async fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let response = String::from_utf8_lossy(&response).into_owned();
        let status = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default();
        Some((status, body))
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .ok()
        .flatten()
}

/// The sum of every sample of metric `name` (all label sets) in a Prometheus text body.
pub fn metric_sum(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
