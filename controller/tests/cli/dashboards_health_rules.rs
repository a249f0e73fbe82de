//! The device-health alert rules of `dashboards/alerts.yaml` run by `promtool test rules` on
//! series written here: an allocated device unhealthy fires after 5 minutes and a free one never;
//! a node losing two devices within 10 minutes fires, one losing a device twice 20 minutes apart
//! does not. Needs `promtool` on `PATH` (skipped loudly without it, a failure under CI).

use crate::dashboards_support::{annotations, dashboards_file, promtool_test_rules};

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
    let rules = dashboards_file("alerts.yaml");
    promtool_test_rules(&rule_tests(rules.to_str().unwrap()));
}
