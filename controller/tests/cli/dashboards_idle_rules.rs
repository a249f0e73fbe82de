//! The idle-allocation alert of `dashboards/alerts.yaml` run by `promtool test rules`: devices
//! idle for over an hour on the leader fire after 5 minutes, whatever a standby reports; devices
//! idle for less never do. Needs `promtool` on `PATH` (skipped loudly without it, a failure
//! under CI).

use crate::dashboards_support::{annotations, dashboards_file, promtool_test_rules};

fn rule_tests(rules: &str) -> String {
    format!(
        r#"rule_files:
  - {rules}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'dra_ledger_idle_allocated_devices{{instance="leader:8080",idle_for="1h"}}'
        values: '0x3 2x20'
      - series: 'dra_ledger_idle_allocated_devices{{instance="standby:8080",idle_for="1h"}}'
        values: '0x23'
      - series: 'dra_ledger_idle_allocated_devices{{instance="leader:8080",idle_for="10m"}}'
        values: '5x23'
    alert_rule_test:
      - eval_time: 6m
        alertname: DraLedgerDevicesIdle
        exp_alerts: []
      - eval_time: 10m
        alertname: DraLedgerDevicesIdle
        exp_alerts:
          - exp_labels: {{severity: info}}
            exp_annotations: {idle}
"#,
        idle = annotations("DraLedgerDevicesIdle", "", "2"),
    )
}

#[test]
fn idle_alert_fires_for_devices_idle_over_an_hour_on_any_replica() {
    let rules = dashboards_file("alerts.yaml");
    promtool_test_rules(&rule_tests(rules.to_str().unwrap()));
}
