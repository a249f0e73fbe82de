//! Runs the conformance suite written against the official Kubernetes Python client
//! (`sim/tests/python/test_conformance.py`, pytest) against an in-process simulated cluster.
//!
//! Without python3, pytest or the `kubernetes` package the test is skipped with a message, except
//! under `CI=true`, where it fails: CI installs them (`.ci/run`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use dra_sim::cluster::{start_cluster, ClusterConfig};
use dra_sim::server::ServerConfig;

/// Events the server retains; the suite's 410 test writes past it.
const HISTORY_LIMIT: usize = 100;

/// Why the suite cannot run here, if it cannot.
fn missing_python() -> Option<String> {
    match Command::new("python3")
        .args(["-c", "import pytest, kubernetes"])
        .output()
    {
        Err(error) => Some(format!("python3 cannot be run: {error}")),
        Ok(out) if !out.status.success() => Some(format!(
            "pytest or the kubernetes package is missing: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_client_conformance_suite_passes() {
    if let Some(why) = missing_python() {
        testkit::tools::skip_or_fail(&format!(
            "the Python conformance suite needs python3 with pytest and kubernetes==30.1.0 ({why})"
        ));
        return;
    }
    let config = ClusterConfig {
        server: ServerConfig {
            history_limit: HISTORY_LIMIT,
            bookmark_interval: Duration::from_millis(500),
            ..ServerConfig::default()
        },
        ..ClusterConfig::default()
    };
    let cluster = start_cluster(config).await.expect("cluster starts");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    cluster
        .server()
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let status = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE"])
            .arg(&suite)
            .env("DRA_SIM_KUBECONFIG", &kubeconfig)
            .env("DRA_SIM_HISTORY_LIMIT", HISTORY_LIMIT.to_string())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .status()
    })
    .await
    .expect("pytest task")
    .expect("pytest runs");
    cluster.shutdown().await;
    assert!(
        status.success(),
        "the Python conformance suite failed: {status}"
    );
}
