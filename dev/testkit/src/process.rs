//! The built `dra-ledger` as a child process: spawning it, reading its output line by line while
//! it runs, finding the admin address it announces, plain HTTP requests against that address, and
//! signals. The binary's path comes from the test (`env!("CARGO_BIN_EXE_dra-ledger")`), which
//! only the controller crate's tests know.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::eventually_blocking;

/// How long a process may take to announce that it is up.
pub const STARTUP: Duration = Duration::from_secs(60);

/// Leader election flags of `dra-ledger run` short enough for a test: a lease not renewed
/// expires 2 s after its last renewal (renew deadline 1.5 s, retry every 200 ms).
pub const SHORT_LEASE_ARGS: [&str; 6] = [
    "--leader-elect-lease-duration",
    "2s",
    "--leader-elect-renew-deadline",
    "1500ms",
    "--leader-elect-retry-period",
    "200ms",
];

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

    /// Stdout of `child` (which must have been spawned with it piped).
    pub fn stdout(child: &mut Child) -> Self {
        Lines::new(child.stdout.take().expect("stdout piped"))
    }

    /// Stderr of `child` (which must have been spawned with it piped).
    pub fn stderr(child: &mut Child) -> Self {
        Lines::new(child.stderr.take().expect("stderr piped"))
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

    /// Takes the lines that have arrived, without waiting.
    pub fn pump(&mut self) {
        while let Ok(line) = self.receiver.try_recv() {
            self.seen.push(line);
        }
    }

    /// Reads until the stream ends (or stays silent for 30 s).
    pub fn drain(&mut self) {
        while let Ok(line) = self.receiver.recv_timeout(Duration::from_secs(30)) {
            self.seen.push(line);
        }
    }

    /// Every line seen so far, one per line.
    pub fn text(&self) -> String {
        self.seen.join("\n")
    }
}

/// A child process killed (and reaped) when it is dropped, however the test ends.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Spawns `binary` with `args`, stdout and stderr piped.
pub fn spawn(binary: impl AsRef<Path>, args: &[&str]) -> Child {
    let binary = binary.as_ref();
    Command::new(binary)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{} starts: {error}", binary.display()))
}

/// The admin address a `run` or `demo` with `--log-format json` logs in its "Controller started"
/// line, if `line` is that line.
pub fn started_line_addr(line: &str) -> Option<String> {
    let entry: serde_json::Value = serde_json::from_str(line).ok()?;
    if entry["fields"]["message"] != "Controller started" {
        return None;
    }
    entry["fields"]["listen"].as_str().map(str::to_owned)
}

/// Waits for the "Controller started" log line of a `run` or `demo` with `--log-format json`;
/// returns the admin address it names.
pub fn controller_addr(logs: &mut Lines) -> String {
    logs.wait_for(STARTUP, started_line_addr)
}

/// The admin address of `demo`'s banner line `admin API: http://ADDR/healthz ...`, if `line` is
/// that line.
pub fn demo_banner_addr(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("admin API:")?.trim();
    let url = rest.split_whitespace().next()?;
    Some(
        url.strip_prefix("http://")?
            .strip_suffix("/healthz")?
            .to_owned(),
    )
}

/// The device page's URL of `demo`'s banner line `page: http://ADDR/ ...`, if `line` is that
/// line.
pub fn demo_banner_page(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("page:")?.trim();
    let url = rest.split_whitespace().next()?;
    url.starts_with("http://").then(|| url.to_owned())
}

/// The simulated cluster's URL of `demo`'s banner line `cluster: http://ADDR (kubectl ...)`,
/// if `line` is that line.
pub fn demo_banner_cluster(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("cluster:")?.trim();
    let url = rest.split_whitespace().next()?;
    url.starts_with("http").then(|| url.to_owned())
}

/// A running `dra-ledger demo`: the process, its output and its admin address.
pub struct Demo {
    /// The process, killed when dropped.
    pub child: KillOnDrop,
    /// Its stdout (the banner, progress and summary).
    pub stdout: Lines,
    /// Its stderr (the log).
    pub stderr: Lines,
    /// The admin API's `host:port`.
    pub addr: String,
}

/// Starts `binary demo ARGS` and returns once it printed its admin address and "controller
/// ready".
pub fn start_demo(binary: impl AsRef<Path>, args: &[&str]) -> Demo {
    let mut all = vec!["demo"];
    all.extend_from_slice(args);
    let mut child = spawn(binary, &all);
    let mut stdout = Lines::stdout(&mut child);
    let stderr = Lines::stderr(&mut child);
    let child = KillOnDrop(child);
    let addr = stdout.wait_for(STARTUP, demo_banner_addr);
    stdout.wait_for(STARTUP, |line| {
        line.contains("controller ready").then_some(())
    });
    Demo {
        child,
        stdout,
        stderr,
        addr,
    }
}

/// An HTTP answer: status, headers (names lowercased) and body.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The headers, names lowercased, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl HttpAnswer {
    /// The value of header `name` (lowercase), if the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `METHOD path` on `addr` without a body (and with `Connection: close`); the whole answer.
/// Panics when the server cannot be reached or answers no HTTP.
pub fn http_request(addr: &str, method: &str, path: &str) -> HttpAnswer {
    try_http_request(addr, method, path).expect("admin server answers")
}

/// [`http_request`], or the error when the server cannot be reached or answers no HTTP.
pub fn try_http_request(addr: &str, method: &str, path: &str) -> std::io::Result<HttpAnswer> {
    try_http_send(addr, method, path, "", "")
}

/// `METHOD path` on `addr` with a JSON `body` (and with `Connection: close`); the whole answer.
/// Panics when the server cannot be reached or answers no HTTP.
pub fn http_send_json(addr: &str, method: &str, path: &str, body: &str) -> HttpAnswer {
    try_http_send(addr, method, path, "application/json", body).expect("server answers")
}

/// `METHOD path` on `addr` with `body` of `content_type` (none when empty).
fn try_http_send(
    addr: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<HttpAnswer> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let content_type = if content_type.is_empty() {
        String::new()
    } else {
        format!("Content-Type: {content_type}\r\n")
    };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{content_type}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or((response.as_str(), ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP status line in {head:?}")))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Ok(HttpAnswer {
        status,
        headers,
        body: body.to_owned(),
    })
}

/// `GET path` on `addr`; returns the status code and body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let answer = http_request(addr, "GET", path);
    (answer.status, answer.body)
}

/// Waits up to `timeout` until `/readyz` on `addr` answers 200 as the active allocator
/// (`{"status":"ready"}`), not as a standby that has not taken the leader lease yet.
pub fn wait_leading(addr: &str, timeout: Duration) {
    eventually_blocking(
        format_args!("{addr} ready as the leader"),
        timeout,
        Duration::from_millis(50),
        || {
            let (status, body) = http_get(addr, "/readyz");
            status == 200 && body.contains("\"status\":\"ready\"")
        },
    );
}

/// Sends signal `name` (`TERM`, `INT`, `KILL`, `STOP`, `CONT`, ...) to process `pid` with
/// `kill`; whether it was delivered (a process that has exited gets none).
pub fn try_signal_pid(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Sends signal `name` to process `pid`, failing the test if it could not be delivered.
pub fn signal_pid(pid: u32, name: &str) {
    assert!(try_signal_pid(pid, name), "kill -{name} {pid}");
}

/// Sends signal `name` to `child`.
pub fn signal(child: &Child, name: &str) {
    signal_pid(child.id(), name);
}

/// Sends SIGTERM to `child`.
pub fn terminate(child: &Child) {
    signal(child, "TERM");
}

/// Waits for `child` to exit, killing it (and failing) after `timeout`.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("child waited for") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("process did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_banner_names_the_page_and_the_cluster() {
        let page = "  page:        http://127.0.0.1:8080/  (open it in a browser: ...)";
        assert_eq!(
            demo_banner_page(page).as_deref(),
            Some("http://127.0.0.1:8080/")
        );
        let cluster = "  cluster:     http://127.0.0.1:4000 (kubectl --kubeconfig k)";
        assert_eq!(
            demo_banner_cluster(cluster).as_deref(),
            Some("http://127.0.0.1:4000")
        );
        assert_eq!(demo_banner_page(cluster), None);
        assert_eq!(demo_banner_cluster(page), None);
    }

    #[test]
    fn the_started_line_of_a_json_log_names_the_admin_address() {
        let line = r#"{"fields":{"message":"Controller started","listen":"127.0.0.1:4242"}}"#;
        assert_eq!(started_line_addr(line).as_deref(), Some("127.0.0.1:4242"));
        assert_eq!(started_line_addr(r#"{"fields":{"message":"other"}}"#), None);
        assert_eq!(started_line_addr("not json"), None);
    }

    #[test]
    fn the_demo_banner_names_the_admin_address() {
        let line = "  admin API: http://127.0.0.1:8080/healthz (also /metrics)";
        assert_eq!(demo_banner_addr(line).as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(demo_banner_addr("progress: 3 pods"), None);
    }

    #[test]
    fn lines_of_a_child_are_read_until_one_matches() {
        let mut child = spawn("sh", &["-c", "echo one; echo two; echo three"]);
        let mut lines = Lines::stdout(&mut child);
        let found = lines.wait_for(STARTUP, |line| (line == "two").then_some(line.len()));
        assert_eq!(found, 3);
        assert_eq!(lines.seen, ["one", "two"]);
        assert!(wait_exit(&mut child, STARTUP).success());
    }
}
