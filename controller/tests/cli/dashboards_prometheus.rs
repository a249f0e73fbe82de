//! The dashboard and the alert rules against a real Prometheus: `dra-ledger demo` runs a small
//! workload, Prometheus scrapes it every second, and every panel query, variable query and rule
//! expression is evaluated through the HTTP API without error; the core panels return data.
//! `promtool` checks the rule file and the `/metrics` output.
//!
//! Needs `prometheus` and `promtool` on `PATH` (Debian's `prometheus` package). With `CI` set
//! their absence fails the tests; without it the tests say loudly that they skip.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli_support::{self, http_get, Demo, KillOnDrop};
use crate::dashboards_support::{
    alert_rules, dashboard, dashboards_file, free_port, http, instant_query, panel_queries,
    sample_values, substitute, variable_queries,
};

/// Panels that must show data while the workload runs.
const CORE_PANELS: [&str; 8] = [
    "Device utilisation",
    "Utilisation by node",
    "Utilisation by $attribute",
    "Allocation rate by outcome",
    "Allocate latency",
    "Ledger commit latency",
    "Commit batch size",
    "Pending intents",
];

/// Alerts whose expressions return nothing while the demo runs ready.
const HEALTHY_SILENT: [&str; 4] = [
    "DraLedgerDown",
    "DraLedgerMetricsAbsent",
    "DraLedgerNotReady",
    "DraLedgerNoLeader",
];

/// `name` on `PATH`, or a skip (a failure under CI) naming the package that provides it.
fn tool(name: &str) -> Option<PathBuf> {
    testkit::require_tool(
        name,
        "Debian's prometheus package provides prometheus and promtool: apt-get install -y prometheus",
    )
}

/// Runs `promtool` with `args`, `stdin` on its standard input; returns success and all output.
fn promtool(promtool: &Path, args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new(promtool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn alert_rules_pass_promtool_check() {
    let Some(promtool_path) = tool("promtool") else {
        return;
    };
    let rules = dashboards_file("alerts.yaml");
    let (ok, output) = promtool(
        &promtool_path,
        &["check", "rules", rules.to_str().unwrap()],
        "",
    );
    assert!(ok, "{output}");
    let count = alert_rules().len();
    assert!(
        output.contains(&format!("SUCCESS: {count} rules found")),
        "{output}"
    );
}

/// A small `dra-ledger demo` whose workload lasts the whole test.
fn start_demo() -> Demo {
    cli_support::start_demo(&[
        "--pods",
        "120",
        "--nodes",
        "4",
        "--devices-per-node",
        "4",
        "--duration",
        "90s",
        "--listen",
        "127.0.0.1:0",
    ])
}

fn start_prometheus(binary: &Path, dir: &Path, target: &str) -> (KillOnDrop, String) {
    let config = dir.join("prometheus.yml");
    let rules = dashboards_file("alerts.yaml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - '{}'\n\
             scrape_configs:\n  - job_name: dra-ledger\n    static_configs:\n      \
             - targets: ['{target}']\n",
            rules.display()
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prometheus starts");
    let child = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(http(&addr, "GET", "/-/ready", &[]), Ok((200, _))) {
        let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "prometheus not ready:\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    (child, addr)
}

/// Polls `query` until its first value satisfies `done`.
fn wait_until(prometheus: &str, query: &str, done: impl Fn(f64) -> bool) {
    testkit::eventually_blocking(
        query,
        Duration::from_secs(45),
        Duration::from_millis(500),
        || {
            instant_query(prometheus, query)
                .map(|result| sample_values(&result))
                .is_ok_and(|v| v.first().is_some_and(|x| done(*x)))
        },
    );
}

#[test]
fn dashboard_and_rule_queries_run_against_prometheus_scraping_the_demo() {
    let (Some(prometheus_bin), Some(promtool_bin)) = (tool("prometheus"), tool("promtool")) else {
        return;
    };
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let demo = start_demo();
    let (_prometheus, prometheus) = start_prometheus(&prometheus_bin, dir.path(), &demo.addr);

    // A few scrapes while claims are being allocated.
    wait_until(
        &prometheus,
        "count_over_time(up{job=\"dra-ledger\"}[1m])",
        |n| n >= 6.0,
    );
    wait_until(
        &prometheus,
        "sum(increase(dra_ledger_allocate_duration_seconds_count[30s]))",
        |n| n > 0.0,
    );
    wait_until(&prometheus, "min(up{job=\"dra-ledger\"})", |up| {
        (up - 1.0).abs() < f64::EPSILON
    });

    // The exposition passes promtool's lint while the workload runs.
    let (status, text) = http_get(&demo.addr, "/metrics");
    assert_eq!(status, 200);
    let (ok, output) = promtool(&promtool_bin, &["check", "metrics"], &text);
    assert!(ok && output.trim().is_empty(), "promtool: {output}");

    let mut failures = Vec::new();
    let mut empty = Vec::new();
    let dashboard = dashboard();
    let queries = panel_queries(&dashboard);
    for query in &queries {
        let expr = substitute(&query.expr);
        match instant_query(&prometheus, &expr) {
            Err(error) => failures.push(format!("{} {}: {error}", query.panel, query.ref_id)),
            Ok(result) => {
                let finite = sample_values(&result).iter().any(|v| v.is_finite());
                if CORE_PANELS.contains(&query.panel.as_str()) && !finite {
                    empty.push(format!(
                        "{} {}: {expr} -> {result:?}",
                        query.panel, query.ref_id
                    ));
                }
            }
        }
    }
    for (name, expr) in variable_queries(&dashboard) {
        match instant_query(&prometheus, &substitute(&expr)) {
            Err(error) => failures.push(format!("variable {name}: {error}")),
            Ok(result) if result.is_empty() => empty.push(format!("variable {name}: {expr}")),
            Ok(_) => {}
        }
    }
    let rules = alert_rules();
    for rule in &rules {
        match instant_query(&prometheus, &rule.expr) {
            Err(error) => failures.push(format!("alert {}: {error}", rule.alert)),
            // A healthy, ready process trips none of the availability alerts.
            Ok(result) if HEALTHY_SILENT.contains(&rule.alert.as_str()) && !result.is_empty() => {
                failures.push(format!(
                    "alert {} fires on a healthy demo: {result:?}",
                    rule.alert
                ));
            }
            Ok(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "queries failed:\n{}",
        failures.join("\n")
    );
    assert!(empty.is_empty(), "no data:\n{}", empty.join("\n"));
    for panel in CORE_PANELS {
        assert!(
            queries.iter().any(|q| q.panel == panel),
            "{panel} not found"
        );
    }

    // Prometheus loaded the rule file and evaluates every rule without error.
    let (status, body) = http(&prometheus, "GET", "/api/v1/rules", &[]).unwrap();
    assert_eq!(status, 200, "{body}");
    let loaded: serde_json::Value = serde_json::from_str(&body).unwrap();
    let loaded: Vec<&serde_json::Value> = loaded["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["rules"].as_array().unwrap())
        .collect();
    assert_eq!(loaded.len(), rules.len(), "{body}");
    for rule in loaded {
        assert_eq!(rule["health"], "ok", "{rule}");
    }

    // Once the process is gone, the down alert's expression matches its target.
    drop(demo);
    let down = rules
        .iter()
        .find(|rule| rule.alert == "DraLedgerDown")
        .unwrap();
    wait_until(&prometheus, &format!("count({})", down.expr), |n| n >= 1.0);

    eprintln!(
        "{} panel queries and {} rules evaluated in {:?}",
        queries.len(),
        rules.len(),
        started.elapsed()
    );
}
