//! `schemathesis` against the admin API of a running `dra-ledger demo`, driven by the server's own
//! `OpenAPI` document: every operation, with the bearer token so the protected ones are exercised
//! too, every check (`--checks all`) and every phase, the stateful one following the links it
//! infers between operations. Zero failures are required: no 5xx, no response outside the
//! documented statuses, schemas and content types, no schema-violating request accepted, no
//! schema-valid request refused, no protected operation answering without the token. The one
//! setting, in `schemathesis.toml` beside this file: a `continue` of `GET /v1/claims` that the
//! server did not issue answers 400 (or 410 from another leader's ledger), as the document says.
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
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/schemathesis.toml");
    let mut run = Command::new("schemathesis")
        .current_dir(dir)
        .args(["--no-color", "--config-file", config, "run"])
        .arg(format!("http://{addr}/v1/openapi.json"))
        .args(["--checks", "all"])
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

/// Every documented operation.
fn operations_under_test() -> u64 {
    let document = dra_api::openapi();
    document
        .paths
        .paths
        .values()
        .map(|item| {
            [&item.get, &item.post, &item.put, &item.delete, &item.patch]
                .iter()
                .filter(|op| op.is_some())
                .count() as u64
        })
        .sum()
}

/// The phase lines of the summary (`✅ Stateful`, `⏭  Examples`, ...).
fn phase_passed(output: &str, phase: &str) -> bool {
    output
        .lines()
        .any(|line| line.trim_start().starts_with('✅') && line.trim_end().ends_with(phase))
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
    for phase in ["Coverage", "Fuzzing", "Stateful"] {
        assert!(
            phase_passed(&output, phase),
            "phase {phase} did not pass:\n{output}"
        );
    }
    let links = output
        .lines()
        .find_map(|line| line.trim().strip_prefix("API Links:"))
        .and_then(|rest| rest.trim().split(' ').next()?.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(links > 0, "the stateful phase followed no link:\n{output}");
    assert!(
        !output.contains("Server Unavailable"),
        "the server stopped responding:\n{output}"
    );
    assert!(
        !errors.seen.iter().any(|line| line.contains(TOKEN)),
        "the token appears in the demo's log"
    );
}
