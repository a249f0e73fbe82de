//! The dashboard and the alert rules of `dashboards/` read only metrics that the controller
//! (`dra-api`) or the node agent (`dra-node`) defines,
//! use only template variables the dashboard declares, and carry what an operator needs (a
//! Prometheus datasource variable; `for:`, a severity and annotations on every alert). These
//! checks need no Prometheus; `dashboards_prometheus.rs` runs the queries against a real one.

use std::collections::BTreeSet;

use crate::dashboards_support::{
    alert_rules, dashboard, metric_names, panel_queries, referenced_variables, variable_names,
    variable_queries, GRAFANA_BUILTINS,
};
use dra_api::metrics::{CAPACITY_METRIC_NAMES, METRIC_NAMES};
use dra_api::Metrics;
use dra_node::metrics::{NodeMetrics, METRIC_NAMES as NODE_METRIC_NAMES};

/// Every series name the metrics module can expose: the metric names, the `_bucket`, `_sum`
/// and `_count` series of its histograms, and Prometheus' own `up`.
fn defined_series() -> BTreeSet<String> {
    let text = Metrics::new("test").unwrap().encode().unwrap()
        + &NodeMetrics::new().unwrap().encode().unwrap();
    let names = METRIC_NAMES
        .iter()
        .chain(CAPACITY_METRIC_NAMES.iter())
        .chain(NODE_METRIC_NAMES.iter());
    let mut out: BTreeSet<String> = names.clone().map(|name| (*name).to_owned()).collect();
    for name in names {
        if text.contains(&format!("# TYPE {name} histogram")) {
            for suffix in ["_bucket", "_sum", "_count"] {
                out.insert(format!("{name}{suffix}"));
            }
        }
    }
    out.insert("up".to_owned());
    out
}

#[test]
fn metric_name_extraction_skips_functions_labels_and_keywords() {
    let names = metric_names(
        "histogram_quantile(0.99, sum by (le, node) (rate(foo_bucket{state=~\"a|b\", \
         x='{y}'}[$__rate_interval] offset 5m)))\n/ on (node) group_left(model) bar_total \
         > bool 1e3 and baz:recorded unless max without (instance) (qux)",
    );
    let expected: BTreeSet<String> = ["foo_bucket", "bar_total", "baz:recorded", "qux"]
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    assert_eq!(names, expected);
}

#[test]
fn every_metric_in_dashboard_and_rules_is_defined() {
    let defined = defined_series();
    let dashboard = dashboard();
    let mut expressions: Vec<(String, String)> = panel_queries(&dashboard)
        .into_iter()
        .map(|query| (format!("panel {:?}", query.panel), query.expr))
        .collect();
    expressions.extend(
        variable_queries(&dashboard)
            .into_iter()
            .map(|(name, expr)| (format!("variable {name}"), expr)),
    );
    expressions.extend(
        alert_rules()
            .into_iter()
            .map(|rule| (format!("alert {}", rule.alert), rule.expr)),
    );
    assert!(expressions.len() > 30, "{}", expressions.len());
    let mut used = BTreeSet::new();
    for (place, expr) in &expressions {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{place} reads no metric: {expr}");
        for name in names {
            assert!(
                defined.contains(&name),
                "{place} uses {name}, which api/src/metrics does not define"
            );
            used.insert(name);
        }
    }
    // The dashboard and rules together cover the metrics that describe allocation health.
    for name in [
        "dra_ledger_allocations_total",
        "dra_ledger_allocate_duration_seconds_bucket",
        "dra_ledger_ledger_commit_duration_seconds_bucket",
        "dra_ledger_ledger_commit_batch_size_bucket",
        "dra_ledger_intents_pending",
        "dra_ledger_reconcile_drift_total",
        "dra_ledger_workqueue_depth",
        "dra_ledger_api_requests_total",
        "dra_ledger_node_devices",
        "dra_ledger_attribute_devices",
        "dra_ledger_ready",
        "up",
    ] {
        assert!(used.contains(name), "{name} is on no panel or rule");
    }
}

#[test]
fn dashboard_variables_used_by_queries_are_defined() {
    let dashboard = dashboard();
    let declared = variable_names(&dashboard);
    let list = dashboard["templating"]["list"].as_array().unwrap();
    let mut texts: Vec<String> = panel_queries(&dashboard)
        .into_iter()
        .map(|query| query.expr)
        .collect();
    texts.extend(
        list.iter()
            .filter_map(|var| var["query"]["query"].as_str().map(str::to_owned)),
    );
    let mut used = BTreeSet::new();
    for text in &texts {
        for name in referenced_variables(text) {
            assert!(
                declared.contains(&name) || GRAFANA_BUILTINS.contains(&name.as_str()),
                "${name} is not a variable of the dashboard: {text}"
            );
            used.insert(name);
        }
    }
    for name in ["instance", "node", "attribute", "value", "__rate_interval"] {
        assert!(used.contains(name), "${name} is used by no query");
    }
}

#[test]
fn every_panel_reads_the_prometheus_datasource_variable() {
    let dashboard = dashboard();
    let schema = dashboard["schemaVersion"].as_u64().unwrap();
    assert!(schema >= 39, "schemaVersion {schema} predates Grafana 11");
    let list = dashboard["templating"]["list"].as_array().unwrap();
    let datasource = list
        .iter()
        .find(|var| var["name"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let mut ids = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "duplicate panel id"
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"]["uid"], "${datasource}");
        }
        let width = panel["gridPos"]["w"].as_u64().unwrap();
        let x = panel["gridPos"]["x"].as_u64().unwrap();
        assert!(x + width <= 24, "{} does not fit the grid", panel["title"]);
    }
}

#[test]
fn every_alert_has_a_for_duration_severity_and_annotations() {
    let rules = alert_rules();
    let names: BTreeSet<&str> = rules.iter().map(|rule| rule.alert.as_str()).collect();
    for expected in [
        "DraLedgerDown",
        "DraLedgerNotReady",
        "DraLedgerIntentsPendingTooLong",
        "DraLedgerReconcileDrift",
        "DraLedgerAllocationErrorsRising",
    ] {
        assert!(names.contains(expected), "{expected} missing");
    }
    for rule in &rules {
        let yaml = &rule.yaml;
        let pending = yaml["for"].as_str().unwrap_or_default();
        assert!(
            pending.ends_with('m') || pending.ends_with('s'),
            "{}: for: {pending:?}",
            rule.alert
        );
        let severity = yaml["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{}: severity {severity:?}",
            rule.alert
        );
        for annotation in ["summary", "description"] {
            let text = yaml["annotations"][annotation].as_str().unwrap_or_default();
            assert!(text.len() > 10, "{}: {annotation} {text:?}", rule.alert);
        }
    }
}
