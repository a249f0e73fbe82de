//! Helpers of the `cli_*` tests: running the built `dra-ledger`, reading its output line by line
//! while it runs, and plain HTTP GETs against its admin server.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dra-ledger"))
}

/// Lines of a child's output, read on a thread.
pub struct Lines {
    receiver: Receiver<String>,
    /// Every line seen so far.
    pub seen: Vec<String>,
}

impl Lines {
    /// Starts reading `stream`.
    pub fn new(stream: impl Read + Send + 'static) -> Self {
        let (sender, receiver) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            receiver,
            seen: Vec::new(),
        }
    }

    /// Waits for the first line (after those already seen) for which `find` returns a value.
    pub fn wait_for<T>(&mut self, timeout: Duration, mut find: impl FnMut(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.receiver.recv_timeout(left) {
                Ok(line) => {
                    let found = find(&line);
                    self.seen.push(line);
                    if let Some(value) = found {
                        return value;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("timed out; output so far:\n{}", self.seen.join("\n"))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("output ended; output so far:\n{}", self.seen.join("\n"))
                }
            }
        }
    }

    /// Reads until the stream ends.
    pub fn drain(&mut self) {
        while let Ok(line) = self.receiver.recv_timeout(Duration::from_secs(30)) {
            self.seen.push(line);
        }
    }
}

/// Stdout of `child` as lines.
pub fn stdout_lines(child: &mut Child) -> Lines {
    let stdout: ChildStdout = child.stdout.take().expect("stdout piped");
    Lines::new(stdout)
}

/// Spawns the binary with piped stdout and stderr.
pub fn spawn(args: &[&str]) -> Child {
    binary()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts")
}

/// `GET path` on `addr`; returns the status code and body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("admin server accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A `dra-ledger sim` of 2 nodes with 2 devices each, serving.
pub struct Sim {
    /// The process.
    pub child: Child,
    /// The kubeconfig it wrote.
    pub kubeconfig: std::path::PathBuf,
    _stdout: Lines,
}

/// Starts `dra-ledger sim` (2 nodes x 2 devices) writing its kubeconfig into `dir`; returns once
/// it printed its URL.
pub fn start_sim(dir: &std::path::Path) -> Sim {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = spawn(&[
        "sim",
        "--nodes",
        "2",
        "--devices-per-node",
        "2",
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
    ]);
    let mut stdout = stdout_lines(&mut child);
    stdout.wait_for(Duration::from_secs(60), |line| {
        line.starts_with("http://").then_some(())
    });
    Sim {
        child,
        kubeconfig,
        _stdout: stdout,
    }
}

/// The admin server address a `run` or `demo` with `--log-format json` logs when it started.
pub fn controller_addr(logs: &mut Lines) -> String {
    logs.wait_for(Duration::from_secs(60), |line| {
        let entry: serde_json::Value = serde_json::from_str(line).ok()?;
        (entry["fields"]["message"] == "Controller started")
            .then(|| entry["fields"]["listen"].as_str().map(str::to_owned))?
    })
}

/// Waits up to `timeout` until `/readyz` on `addr` answers 200 as the active allocator
/// (`{"status":"ready"}`), not as a standby that has not taken the leader lease yet.
pub fn wait_leading(addr: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let (status, body) = http_get(addr, "/readyz");
        if status == 200 && body.contains("\"status\":\"ready\"") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not ready within {timeout:?}: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends signal `name` (`TERM`, `INT`, `STOP`, ...) to `child` with `kill`.
pub fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} {}", child.id());
}

/// Sends SIGTERM to `child`.
pub fn terminate(child: &Child) {
    signal(child, "TERM");
}

/// Waits for `child` to exit, killing it after `timeout`.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("process did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
