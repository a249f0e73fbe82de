//! `dra-ledger demo` end to end: a short workload on the simulated cluster allocates claims,
//! node agents prepare them (CDI specs written and removed, `admin prepared` lists them), serves
//! /readyz and every spec metric on /metrics while it runs, finishes with a consistent ledger and
//! exits 0 (on 1.30, and on 1.34 where the scheduler allocates and the ledger mirrors); with
//! `--pods 0` it serves a cluster that kubectl (through
//! `--kubeconfig-out`) adds work to. The default workload, the README's, runs to its end. Under
//! another `--driver-name` and `--models`, the slices and allocations name that driver (on 1.30
//! and on every `v1` release).

use std::time::Duration;

use crate::cli_support::{http_get, spawn, stdout_lines, wait_exit, Lines};
use dra_api::metrics::METRIC_NAMES;

/// Waits up to `limit` for the demo `child` to exit, asserts that it exited 0 and returns all
/// it printed (`lines`, its stdout).
fn exits_zero(child: &mut std::process::Child, lines: &mut Lines, limit: Duration) -> String {
    let status = wait_exit(child, limit);
    lines.drain();
    let output = lines.seen.join("\n");
    assert!(status.success(), "exit {status:?}\n{output}");
    output
}

/// The number after `label` in a progress line, e.g. `claims_in_total(line) == 27`.
fn number_before(line: &str, suffix: &str) -> Option<u64> {
    let end = line.find(suffix)?;
    line[..end].split_whitespace().last()?.parse().ok()
}

/// `dra-ledger demo` of 20 pods on 4 nodes of 4 devices for at most 120 s, with `ledger` and
/// `extra` arguments, serving on a free port.
fn short_demo(ledger: &std::path::Path, extra: &[&str]) -> std::process::Child {
    let mut args = vec!["demo"];
    args.extend_from_slice(extra);
    args.extend([
        "--pods",
        "20",
        "--nodes",
        "4",
        "--devices-per-node",
        "4",
        "--duration",
        "120s",
        "--listen",
        "127.0.0.1:0",
        "--ledger",
        ledger.to_str().unwrap(),
    ]);
    spawn(&args)
}

#[test]
fn short_demo_allocates_serves_metrics_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("demo.redb");
    let mut child = short_demo(&ledger, &[]);
    let mut lines = stdout_lines(&mut child);
    let addr = lines.wait_for(Duration::from_secs(60), testkit::process::demo_banner_addr);
    let agents: Vec<String> = lines.wait_for(Duration::from_secs(60), |line| {
        let list = line.trim().strip_prefix("node agents: ")?;
        Some(
            list.split(", ")
                .filter_map(|agent| agent.split_once(' ').map(|(_, url)| url.to_owned()))
                .collect(),
        )
    });
    assert_eq!(agents.len(), 4, "one agent per node: {agents:?}");
    assert_eq!(http_get(&addr, "/healthz").0, 200);
    lines.wait_for(Duration::from_secs(60), |line| {
        line.contains("controller ready").then_some(())
    });
    let (status, body) = http_get(&addr, "/readyz");
    assert_eq!(status, 200, "{body}");

    // Wait for a progress line that shows allocations, then look at the metrics.
    lines.wait_for(Duration::from_secs(60), |line| {
        number_before(line, " in total").filter(|total| *total > 0)
    });
    let (status, metrics) = http_get(&addr, "/metrics");
    assert_eq!(status, 200);
    for name in METRIC_NAMES {
        assert!(
            metrics.contains(&format!("# TYPE {name} ")),
            "{name} missing from\n{metrics}"
        );
    }
    assert!(
        metrics.contains("dra_ledger_api_requests_total{code=\"200\",verb=\"watch\"}")
            || metrics.contains("dra_ledger_api_requests_total{code=\"200\",verb=\"get\"}"),
        "{metrics}"
    );

    // An agent lists what it prepared, with the claim's CDI device.
    let prepared = testkit::eventually_blocking(
        "a claim prepared by a node agent",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || {
            agents.iter().find_map(|url| {
                let out = crate::cli_support::binary()
                    .args(["admin", "--server", url, "-o", "json", "prepared"])
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                answer["items"].as_array()?.first().cloned()
            })
        },
    );
    let uid = prepared["uid"].as_str().unwrap();
    assert_eq!(
        prepared["cdiDevices"][0],
        format!("gpu.dra-ledger.io/claim={uid}"),
        "{prepared}"
    );

    let output = exits_zero(&mut child, &mut lines, Duration::from_secs(150));
    assert!(output.contains("workload done after"), "{output}");
    assert!(output.contains("CDI spec written on node-"), "{output}");
    assert!(output.contains("CDI spec removed on node-"), "{output}");
    let written = number_before(
        &output[output.rfind("node agents: ").unwrap()..],
        " CDI specs written",
    );
    assert!(
        written.is_some_and(|n| n >= 20),
        "every pod's claims prepared: {output}"
    );
    assert!(output.contains("removed, 0 left on the nodes"), "{output}");
    assert!(output.contains("20 pods succeeded, 0 failed"), "{output}");
    assert!(
        output.contains("immediate claims deleted: 0 claims left allocated in the ledger"),
        "{output}"
    );
    assert!(output.contains("ledger verified: consistent"), "{output}");
    // The ledger given with --ledger stays and verifies offline too.
    let verified = crate::cli_support::binary()
        .args(["ledger", "verify", "--ledger", ledger.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(verified.status.success(), "{verified:?}");
}

/// The README's demo as it runs by default: 200 pods over 8 nodes of 8 devices, which fill up
/// and drain again, so that pods wait for devices, drivers report nodes unsuitable and the
/// scheduler asks for deallocations. Every pod must run to its end (a pod bound with a claim
/// deallocated under it would stay pending until the demo gives up as stalled).
#[test]
fn the_default_demo_runs_every_pod_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("demo.redb");
    // The demo ends by itself: when the workload is done, or stalled after 120 s.
    let ran = crate::cli_support::binary()
        .args(["demo", "--listen", "127.0.0.1:0", "--ledger"])
        .arg(&ledger)
        .output()
        .unwrap();
    let output = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "exit {:?}\n{output}", ran.status);
    assert!(
        output.contains("200 pods succeeded, 0 failed, 0 running, 0 pending"),
        "{output}"
    );
    assert!(output.contains("removed, 0 left on the nodes"), "{output}");
    assert!(output.contains("ledger verified: consistent"), "{output}");
}

#[test]
fn demo_refuses_a_corrupt_ledger_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("bad.redb");
    std::fs::write(
        &ledger,
        b"definitely not a database, just some bytes of text",
    )
    .unwrap();
    let output = crate::cli_support::binary()
        .args([
            "demo",
            "--pods",
            "1",
            "--nodes",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--ledger",
            ledger.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot open the ledger")
            && stderr.contains("corrupt or not a redb database"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&ledger).unwrap(),
        b"definitely not a database, just some bytes of text"
    );
}

#[test]
fn ctrl_c_stops_the_demo_cleanly_with_a_summary() {
    let mut child = spawn(&[
        "demo",
        "--pods",
        "200",
        "--nodes",
        "2",
        "--devices-per-node",
        "2",
        "--listen",
        "127.0.0.1:0",
    ]);
    let mut lines = stdout_lines(&mut child);
    lines.wait_for(Duration::from_secs(60), |line| {
        line.contains(" to submit |").then_some(())
    });
    crate::cli_support::signal(&child, "INT");
    let output = exits_zero(&mut child, &mut lines, Duration::from_secs(60));
    assert!(output.contains("interrupted after"), "{output}");
    assert!(output.contains("ledger verified: consistent"), "{output}");
}

#[test]
fn a_ledger_reused_from_an_interrupted_demo_is_reconciled_and_the_next_demo_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("reused.redb");
    let demo = |extra: &[&str]| {
        let mut args = vec![
            "demo",
            "--nodes",
            "2",
            "--devices-per-node",
            "4",
            "--listen",
            "127.0.0.1:0",
            "--ledger",
            ledger.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        crate::cli_support::binary().args(&args).output().unwrap()
    };
    let first = demo(&["--pods", "10", "--duration", "2s"]);
    let first_out = String::from_utf8_lossy(&first.stdout);
    assert!(first.status.success(), "{first_out}");
    assert!(first_out.contains("time limit reached"), "{first_out}");

    // The claims of the first (now gone) cluster are released by a reconcile of the second.
    let second = demo(&["--pods", "4"]);
    let second_out = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{second_out}");
    assert!(
        second_out.contains("4 pods succeeded, 0 failed"),
        "{second_out}"
    );
    assert!(
        second_out.contains("immediate claims deleted: 0 claims left allocated in the ledger"),
        "{second_out}"
    );
}

/// A pod of the demo's `one-gpu` template, as a user adds it with kubectl.
const USER_POD: &str = r#"{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "mine", "namespace": "default"},
  "spec": {
    "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
    "resourceClaims": [{"name": "gpu", "source": {"resourceClaimTemplateName": "one-gpu"}}]
  }
}"#;

#[test]
fn demo_without_a_workload_serves_a_cluster_that_kubectl_adds_work_to() {
    let Some(kubectl) = testkit::require_tool("kubectl", "the Kubernetes CLI") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("demo.kubeconfig");
    let mut demo = crate::cli_support::start_demo(&[
        "--pods",
        "0",
        "--nodes",
        "2",
        "--devices-per-node",
        "2",
        "--duration",
        "1h",
        "--listen",
        "127.0.0.1:0",
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
    ]);
    let kubectl = |args: &[&str], input: Option<&str>| {
        let mut child = std::process::Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(input) = input {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "kubectl {args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let nodes = kubectl(&["get", "nodes", "-o", "name"], None);
    assert_eq!(nodes.lines().count(), 2, "{nodes}");
    kubectl(&["create", "-f", "-"], Some(USER_POD));
    testkit::eventually_blocking(
        "the user's pod running",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            let phase = kubectl(
                &["get", "pod", "mine", "-o", "jsonpath={.status.phase}"],
                None,
            );
            (phase == "Running").then_some(())
        },
    );
    let (status, body) = http_get(&demo.addr, "/v1/claims");
    assert_eq!(status, 200);
    assert!(
        body.contains("mine-gpu"),
        "the pod's claim is in the ledger: {body}"
    );
    // Nothing else was submitted: the only claim is the user's.
    let claims = kubectl(&["get", "resourceclaims", "-A", "-o", "name"], None);
    assert_eq!(claims.lines().count(), 1, "{claims}");

    crate::cli_support::signal(&demo.child.0, "INT");
    let status = wait_exit(&mut demo.child.0, Duration::from_secs(60));
    demo.stdout.drain();
    let output = demo.stdout.seen.join("\n");
    assert!(status.success(), "exit {status:?}\n{output}");
    assert!(output.contains("no workload (--pods 0)"), "{output}");
    assert!(output.contains("interrupted after"), "{output}");
}

#[test]
fn demo_on_1_34_has_the_scheduler_allocate_the_agents_prepare_and_the_ledger_mirror() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("demo.redb");
    let mut child = short_demo(&ledger, &["--kubernetes-version", "1.34"]);
    let mut lines = stdout_lines(&mut child);
    let addr = lines.wait_for(Duration::from_secs(60), testkit::process::demo_banner_addr);
    lines.wait_for(Duration::from_secs(60), |line| {
        number_before(line, " in total").filter(|total| *total > 0)
    });
    // What the ledger counts came from the mirror: the controller allocated nothing itself.
    let (status, metrics) = http_get(&addr, "/metrics");
    assert_eq!(status, 200);
    let mirrored = metrics
        .lines()
        .find(|l| {
            l.starts_with("dra_ledger_allocations_total{mode=\"mirrored\",outcome=\"allocated\"}")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
    assert!(mirrored.is_some_and(|n| n > 0), "{metrics}");
    assert!(
        metrics.contains("dra_ledger_allocate_duration_seconds_count 0"),
        "{metrics}"
    );

    let output = exits_zero(&mut child, &mut lines, Duration::from_secs(150));
    assert!(
        output.contains("dra-ledger demo on Kubernetes 1.34 (resource.k8s.io/v1)"),
        "{output}"
    );
    assert!(output.contains("20 pods succeeded, 0 failed"), "{output}");
    let summary = &output[output.rfind("workload done after").unwrap()..];
    let total = number_before(summary, " claims allocated in total");
    assert!(
        total.is_some_and(|n| n >= 20),
        "every pod's claims mirrored: {output}"
    );
    assert!(
        output.contains("pods done: 0 claims left allocated in the ledger"),
        "{output}"
    );
    assert!(output.contains("removed, 0 left on the nodes"), "{output}");
    assert!(output.contains("ledger verified: consistent"), "{output}");
}

/// The allocated driver of every allocated claim listed at `path` of the API server at `api`,
/// in the release's shape.
fn allocated_drivers(api: &str, path: &str) -> Vec<String> {
    let (status, body) = http_get(api, path);
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let claims = list["items"].as_array().cloned().unwrap_or_default();
    claims
        .iter()
        .flat_map(|claim| {
            let allocation = &claim["status"]["allocation"];
            let v1alpha2 = allocation["resourceHandles"].as_array().cloned();
            let v1 = allocation["devices"]["results"].as_array().cloned();
            let entries = v1alpha2.or(v1).unwrap_or_default();
            entries.into_iter().filter_map(|entry| {
                let driver = entry.get("driverName").or_else(|| entry.get("driver"))?;
                driver.as_str().map(str::to_owned)
            })
        })
        .collect()
}

/// `dra-ledger demo` playing `version` under the driver name `gpu.example.com` with L4 devices
/// of 24Gi: its slices and allocated claims name that driver, and its short workload runs to
/// its end.
fn demo_under_another_driver_name(version: &str) {
    const DRIVER: &str = "gpu.example.com";
    let mut child = spawn(&[
        "demo",
        "--kubernetes-version",
        version,
        "--driver-name",
        DRIVER,
        "--models",
        "L4",
        "--memory",
        "24Gi",
        "--numa-nodes",
        "1",
        "--pods",
        "8",
        "--nodes",
        "2",
        "--devices-per-node",
        "2",
        "--duration",
        "120s",
        "--listen",
        "127.0.0.1:0",
    ]);
    let mut lines = stdout_lines(&mut child);
    let api = lines.wait_for(Duration::from_secs(60), |line| {
        let url = line
            .trim()
            .strip_prefix("cluster:")?
            .split_whitespace()
            .next()?;
        Some(url.strip_prefix("http://")?.to_owned())
    });
    let group = if version == "1.30" {
        "resource.k8s.io/v1alpha2"
    } else {
        "resource.k8s.io/v1"
    };
    let (status, slices) = http_get(&api, &format!("/apis/{group}/resourceslices"));
    assert_eq!(status, 200, "{slices}");
    let slices: serde_json::Value = serde_json::from_str(&slices).unwrap();
    let slices = slices["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(slices.len(), 2, "one slice per node: {slices:?}");
    for slice in &slices {
        let driver = slice["driverName"]
            .as_str()
            .or(slice["spec"]["driver"].as_str());
        assert_eq!(driver, Some(DRIVER), "{slice}");
        assert!(slice.to_string().contains("\"L4\""), "{slice}");
        assert!(!slice.to_string().contains("dra-ledger.io"), "{slice}");
    }
    let claims = format!("/apis/{group}/namespaces/default/resourceclaims");
    let drivers = testkit::eventually_blocking(
        "an allocated claim of the workload",
        Duration::from_secs(60),
        Duration::from_millis(50),
        || {
            let drivers = allocated_drivers(&api, &claims);
            (!drivers.is_empty()).then_some(drivers)
        },
    );
    assert!(drivers.iter().all(|d| d == DRIVER), "{drivers:?}");
    let output = exits_zero(&mut child, &mut lines, Duration::from_secs(150));
    assert!(output.contains("8 pods succeeded, 0 failed"), "{output}");
    assert!(output.contains("ledger verified: consistent"), "{output}");
}

#[test]
fn a_demo_under_another_driver_name_and_models_uses_them_and_finishes_on_1_30() {
    demo_under_another_driver_name("1.30");
}

#[test]
fn a_demo_under_another_driver_name_and_models_uses_them_and_finishes_on_every_v1_release() {
    for version in dra_sim::KubernetesVersion::v1_releases() {
        demo_under_another_driver_name(version.as_str());
    }
}
