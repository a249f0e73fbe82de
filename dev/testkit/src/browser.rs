//! A headless Chromium driven through its `DevTools` protocol over a pipe
//! (`--remote-debugging-pipe`: the browser reads commands on fd 3 and writes answers on fd 4,
//! each a JSON text ended by a NUL byte), so a test can open a page, run script in it, press
//! keys and take a screenshot without a web driver or a websocket client. `sh` connects the two
//! descriptors to the child's stdin and stdout.
//!
//! Only what the page tests and the scale bench need: [`Browser::open`], [`Browser::eval`], [`Browser::press`],
//! [`Browser::screenshot`]. Depends on `serde_json` and the standard library.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::process::KillOnDrop;

/// How long one protocol command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Debian's `chromium` (or another Chromium) on `PATH`.
pub fn find_chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find_map(crate::tools::on_path)
}

/// [`find_chromium`]; `None` after printing why the calling test is skipped, or a panic under
/// CI.
pub fn require_chromium() -> Option<PathBuf> {
    find_chromium().or_else(|| {
        crate::tools::skip_or_fail(
            "no chromium on PATH (apt-get install -y chromium; .ci/run installs it)",
        );
        None
    })
}

/// A headless browser with one page open, killed when dropped.
pub struct Browser {
    child: KillOnDrop,
    commands: ChildStdin,
    answers: Receiver<Value>,
    next_id: u64,
    target: Option<String>,
    session: Option<String>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `chromium` headless with a `width` x `height` window and a fresh profile.
    pub fn launch(chromium: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null"#)
            .arg(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-pipe",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("{} starts: {error}", chromium.display()));
        let commands = child.stdin.take().expect("piped stdin");
        let mut output = BufReader::new(child.stdout.take().expect("piped stdout"));
        let (send, answers) = channel();
        std::thread::spawn(move || loop {
            let mut message = Vec::new();
            match output.read_until(0, &mut message) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    message.pop();
                    if let Ok(value) = serde_json::from_slice::<Value>(&message) {
                        if send.send(value).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Browser {
            child: KillOnDrop(child),
            commands,
            answers,
            next_id: 0,
            target: None,
            session: None,
            _profile: profile,
        }
    }

    /// Sends `method` with `params` (to the open page once there is one) and waits for its
    /// result; panics on a protocol error.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({"id": id, "method": method});
        command["params"] = params;
        if let Some(session) = &self.session {
            command["sessionId"] = json!(session);
        }
        let mut text = command.to_string().into_bytes();
        text.push(0);
        self.commands
            .write_all(&text)
            .and_then(|()| self.commands.flush())
            .unwrap_or_else(|error| panic!("{method}: the browser is gone: {error}"));
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(answer) if answer["id"] == json!(id) => {
                    assert!(answer.get("error").is_none(), "{method}: {answer}");
                    return answer["result"].clone();
                }
                Ok(_event) => {}
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer in time"),
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.try_wait();
                    panic!("{method}: the browser closed its pipe ({status:?})")
                }
            }
        }
    }

    /// Opens `url` in a new page, which later calls address; the page opened before is closed.
    pub fn open(&mut self, url: &str) {
        self.session = None;
        if let Some(previous) = self.target.take() {
            self.call("Target.closeTarget", json!({"targetId": previous}));
        }
        let target = self.call("Target.createTarget", json!({"url": url}));
        self.target = target["targetId"].as_str().map(str::to_owned);
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = Some(
            attached["sessionId"]
                .as_str()
                .expect("a session id")
                .to_owned(),
        );
    }

    /// The value of the script `expression` in the page (awaited when it is a promise);
    /// panics when it throws.
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Presses and releases the key `key` (a DOM key name: `ArrowRight`, `Tab`, ...) in the
    /// focused element.
    pub fn press(&mut self, key: &str, code: u32) {
        for kind in ["rawKeyDown", "keyUp"] {
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code}),
            );
        }
    }

    /// Writes a PNG of the whole page to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let data = decode_base64(shot["data"].as_str().expect("screenshot data"));
        std::fs::write(path, data).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    }
}

/// Standard base64 (with padding) to bytes; other characters are skipped.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let sextets: Vec<u8> = text.bytes().filter_map(value).collect();
    let mut out = Vec::with_capacity(sextets.len() * 3 / 4);
    for chunk in sextets.chunks(4) {
        let mut bits = 0u32;
        for (i, s) in chunk.iter().enumerate() {
            bits |= u32::from(*s) << (18 - 6 * i);
        }
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::decode_base64;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("aGVsbG8="), b"hello");
        assert_eq!(decode_base64("aGVsbG8h"), b"hello!");
        assert_eq!(decode_base64("aGk="), b"hi");
        assert_eq!(decode_base64(""), b"");
    }
}
