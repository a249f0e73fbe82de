//! `schemathesis` against the admin API of a running `dra-ledger demo`, driven by the server's own
//! `OpenAPI` document: every operation, with the bearer token so the protected ones are exercised
//! too, and every check but `positive_data_acceptance` (a `continue` token is opaque: a string the
//! schema allows may still not be one the server issued). Zero failures are required: no 5xx, no
//! response outside the documented statuses, schemas and content types, no schema-violating
//! request accepted, no protected operation answering without the token.
//!
//! The run is bounded by a fixed number of examples per operation and a fixed seed. Without
//! `schemathesis` on `PATH` the test is skipped with a message, except under `CI=true`, where that
//! is a failure (`.ci/run` installs it).

use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::cli_support::{self, Demo, Lines};

const TOKEN: &str = "schemathesis-admin-token";
/// Examples per operation and phase; about ten seconds for the whole document on two cores.
const MAX_EXAMPLES: &str = "150";
const SEED: &str = "20261202";

/// The number after `label` on a line of the summary, e.g. `Tested: 14`.
fn summary_number(output: &str, label: &str) -> Option<u64> {
    output.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(label)?;
        rest.trim().split(['/', ' ']).next()?.parse().ok()
    })
}

/// The closing part of the schemathesis output, from its summary on.
fn summary(output: &str) -> &str {
    output.find("= SUMMARY =").map_or(output, |start| {
        &output[output[..start].rfind('\n').unwrap_or(0)..]
    })
}

/// `dra-ledger demo` with the admin token, serving on a free port, once the controller is ready.
fn start_demo(token: &std::path::Path) -> Demo {
    // One node with two devices and pods that each run a few seconds: the workload lasts far
    // longer than the run, so the demo serves (and its ledger changes) throughout.
    cli_support::start_demo(&[
        "--nodes",
        "1",
        "--devices-per-node",
        "2",
        "--pods",
        "400",
        "--duration",
        "600s",
        "--workers",
        "2",
        "--listen",
        "127.0.0.1:0",
        "--admin-token-file",
        token.to_str().unwrap(),
    ])
}

/// Runs schemathesis against `addr` from `dir`; its exit status, stdout and stderr.
fn run_schemathesis(dir: &std::path::Path, addr: &str) -> (ExitStatus, String, String) {
    let started = Instant::now();
    let mut run = Command::new("schemathesis")
        .current_dir(dir)
        .args(["--no-color", "run"])
        .arg(format!("http://{addr}/v1/openapi.json"))
        .args([
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance",
        ])
        .args(["--max-examples", MAX_EXAMPLES, "--seed", SEED])
        .args(["--workers", "1", "--generation-database", "none"])
        .args(["--request-timeout", "30"])
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("schemathesis starts");
    let mut out = Lines::new(run.stdout.take().unwrap());
    let mut err = Lines::new(run.stderr.take().unwrap());
    let status = crate::cli_support::wait_exit(&mut run, Duration::from_secs(300));
    out.drain();
    err.drain();
    let output = out.seen.join("\n");
    println!(
        "schemathesis ({:.1}s):\n{}",
        started.elapsed().as_secs_f64(),
        summary(&output)
    );
    (status, output, err.seen.join("\n"))
}

/// Every documented operation but the one serving the document, which schemathesis leaves out.
fn operations_under_test() -> u64 {
    let document = dra_api::openapi();
    document
        .paths
        .paths
        .iter()
        .filter(|(path, _)| path.as_str() != "/v1/openapi.json")
        .map(|(_, item)| {
            [&item.get, &item.post, &item.put, &item.delete, &item.patch]
                .iter()
                .filter(|op| op.is_some())
                .count() as u64
        })
        .sum()
}

#[test]
fn schemathesis_finds_no_failure_in_the_admin_api() {
    if testkit::require_tool(
        "schemathesis",
        "pip install schemathesis; .ci/run installs it",
    )
    .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let mut demo = start_demo(&token);
    let (status, output, stderr) = run_schemathesis(dir.path(), &demo.addr);
    let _ = demo.child.kill();
    let _ = demo.child.wait();
    let errors = demo.stderr;

    assert!(
        status.success(),
        "schemathesis found failures (exit {status:?}):\n{output}\n{stderr}"
    );
    let selected = summary_number(&output, "Selected:").expect("a summary with Selected:");
    let tested = summary_number(&output, "Tested:").expect("a summary with Tested:");
    assert_eq!(selected, operations_under_test(), "{output}");
    assert_eq!(tested, selected, "operations left untested:\n{output}");
    assert!(
        !output.contains("Server Unavailable"),
        "the server stopped responding:\n{output}"
    );
    assert!(
        !errors.seen.iter().any(|line| line.contains(TOKEN)),
        "the token appears in the demo's log"
    );
}
