//! The device-health alert rules of `dashboards/alerts.yaml` run by `promtool test rules` on
//! series written here: an allocated device unhealthy fires after 5 minutes and a free one never;
//! a node losing two devices within 10 minutes fires, one losing a device twice 20 minutes apart
//! does not. Needs `promtool` on `PATH` (skipped loudly without it, a failure under CI).

use std::process::Command;

use crate::dashboards_support::{alert_rules, dashboards_file};

/// The annotations of alert `name` as Prometheus renders them for `node` and `value`, as a
/// flow mapping (promtool compares every annotation).
fn annotations(name: &str, node: &str, value: &str) -> String {
    let rule = alert_rules()
        .into_iter()
        .find(|rule| rule.alert == name)
        .unwrap_or_else(|| panic!("no alert {name}"));
    let mut rendered = serde_json::Map::new();
    for (key, text) in rule.yaml["annotations"].as_mapping().unwrap() {
        let text = text
            .as_str()
            .unwrap()
            .replace("{{ $labels.node }}", node)
            .replace("{{ $value }}", value);
        rendered.insert(key.as_str().unwrap().to_owned(), text.into());
    }
    serde_json::Value::Object(rendered).to_string()
}

/// The promtool test file: series per case and the alerts expected at each evaluation time.
fn rule_tests(rules: &str) -> String {
    format!(
        r#"rule_files:
  - {rules}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'dra_ledger_unhealthy_devices{{instance="c:8080",node="node-a",allocated="true"}}'
        values: '0 1x20'
      - series: 'dra_ledger_unhealthy_devices{{instance="c:8080",node="node-b",allocated="false"}}'
        values: '1x20'
    alert_rule_test:
      - eval_time: 4m
        alertname: DraLedgerAllocatedDeviceUnhealthy
        exp_alerts: []
      - eval_time: 8m
        alertname: DraLedgerAllocatedDeviceUnhealthy
        exp_alerts:
          - exp_labels: {{severity: warning, instance: "c:8080", node: node-a}}
            exp_annotations: {unhealthy}
  - interval: 1m
    input_series:
      - series: 'dra_ledger_device_health_changes_total{{instance="c:8080",node="node-a",health="unhealthy"}}'
        values: '0x10 1 1 2 2x20'
      - series: 'dra_ledger_device_health_changes_total{{instance="c:8080",node="node-b",health="unhealthy"}}'
        values: '0x10 1x19 2x10'
    alert_rule_test:
      - eval_time: 12m
        alertname: DraLedgerNodeLosingDevices
        exp_alerts: []
      - eval_time: 15m
        alertname: DraLedgerNodeLosingDevices
        exp_alerts:
          - exp_labels: {{severity: critical, instance: "c:8080", node: node-a}}
            exp_annotations: {losing}
      - eval_time: 35m
        alertname: DraLedgerNodeLosingDevices
        exp_alerts: []
"#,
        unhealthy = annotations("DraLedgerAllocatedDeviceUnhealthy", "node-a", "1"),
        losing = annotations("DraLedgerNodeLosingDevices", "node-a", "2"),
    )
}

#[test]
fn health_alerts_fire_for_an_allocated_unhealthy_device_and_a_node_losing_devices() {
    let Some(promtool) = testkit::require_tool(
        "promtool",
        "Debian's prometheus package provides promtool: apt-get install -y prometheus",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tests = dir.path().join("health_rules_test.yaml");
    let rules = dashboards_file("alerts.yaml");
    std::fs::write(&tests, rule_tests(rules.to_str().unwrap())).unwrap();

    let output = Command::new(promtool)
        .args(["test", "rules", tests.to_str().unwrap()])
        .output()
        .unwrap();

    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
