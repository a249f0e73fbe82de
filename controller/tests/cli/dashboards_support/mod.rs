//! Helpers of the dashboard tests: reading the Grafana dashboard and the alert rules of
//! `dashboards/`, substituting Grafana's template variables, finding the metric names a query
//! expression reads, and talking to a Prometheus server over plain HTTP.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// A file of the repository's `dashboards/` directory.
pub fn dashboards_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("dashboards")
        .join(name)
}

/// The Grafana dashboard as JSON.
pub fn dashboard() -> Value {
    let path = dashboards_file("dra-ledger.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// One query of a dashboard panel.
#[derive(Debug, Clone)]
pub struct PanelQuery {
    /// The panel title.
    pub panel: String,
    /// The target's `refId`.
    pub ref_id: String,
    /// The query expression as written in the dashboard.
    pub expr: String,
}

/// Every target expression of every panel, rows' nested panels included.
pub fn panel_queries(dashboard: &Value) -> Vec<PanelQuery> {
    fn walk(panels: &[Value], out: &mut Vec<PanelQuery>) {
        for panel in panels {
            let title = panel["title"].as_str().unwrap_or_default().to_owned();
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"]
                    .as_str()
                    .unwrap_or_else(|| panic!("panel {title:?} has a target without expr"));
                out.push(PanelQuery {
                    panel: title.clone(),
                    ref_id: target["refId"].as_str().unwrap_or_default().to_owned(),
                    expr: expr.to_owned(),
                });
            }
            if let Some(nested) = panel["panels"].as_array() {
                walk(nested, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dashboard["panels"].as_array().expect("panels"), &mut out);
    out
}

/// The dashboard's query variables as `(name, PromQL)`: Grafana's `label_values(expr, label)`
/// becomes `group by (label) (expr)`, which returns one series per value.
pub fn variable_queries(dashboard: &Value) -> Vec<(String, String)> {
    let list = dashboard["templating"]["list"]
        .as_array()
        .expect("templating");
    list.iter()
        .filter(|var| var["type"] == "query")
        .map(|var| {
            let name = var["name"].as_str().expect("variable name").to_owned();
            let query = var["query"]["query"]
                .as_str()
                .or_else(|| var["query"].as_str())
                .expect("variable query");
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|rest| rest.strip_suffix(')'))
                .unwrap_or_else(|| panic!("variable {name}: not label_values(...): {query}"));
            let (expr, label) = inner.rsplit_once(',').expect("label_values(expr, label)");
            (
                name,
                format!("group by ({}) ({})", label.trim(), expr.trim()),
            )
        })
        .collect()
}

/// The names of the dashboard's template variables.
pub fn variable_names(dashboard: &Value) -> BTreeSet<String> {
    dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .map(|var| var["name"].as_str().expect("variable name").to_owned())
        .collect()
}

/// The variables Grafana itself provides and that the queries use.
pub const GRAFANA_BUILTINS: [&str; 3] = ["__rate_interval", "__interval", "__range"];

/// The values the tests give the template variables: every variable's "All" (`.*`), the
/// `model` attribute, and rate windows long enough for one-second scrapes.
pub const SUBSTITUTIONS: [(&str, &str); 7] = [
    ("__rate_interval", "30s"),
    ("__interval", "15s"),
    ("__range", "5m"),
    ("instance", ".*"),
    ("node", ".*"),
    ("attribute", "model"),
    ("value", ".*"),
];

/// The variable names referenced in `text` as `$name` or `${name}`.
pub fn referenced_variables(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let braced = rest.starts_with('{');
        let body = if braced { &rest[1..] } else { rest };
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// `expr` with every template variable replaced by its value from [`SUBSTITUTIONS`]; panics on
/// a variable without a value.
pub fn substitute(expr: &str) -> String {
    let mut out = expr.to_owned();
    for (name, value) in SUBSTITUTIONS {
        out = out.replace(&format!("${{{name}}}"), value);
    }
    // Longest names first, so that `$__rate_interval` is not taken for `$__range`-like prefixes.
    let mut by_length = SUBSTITUTIONS.to_vec();
    by_length.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    for (name, value) in by_length {
        out = out.replace(&format!("${name}"), value);
    }
    assert!(!out.contains('$'), "unsubstituted variable in {out}");
    out
}

/// One alerting rule of `alerts.yaml`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The alert name.
    pub alert: String,
    /// The rule's YAML.
    pub yaml: serde_yaml::Value,
    /// The expression.
    pub expr: String,
}

/// Every rule of `dashboards/alerts.yaml`.
pub fn alert_rules() -> Vec<Rule> {
    let path = dashboards_file("alerts.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: serde_yaml::Value = serde_yaml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    let mut out = Vec::new();
    for group in doc["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let alert = rule["alert"].as_str().expect("every rule is an alert");
            out.push(Rule {
                alert: alert.to_owned(),
                expr: rule["expr"].as_str().expect("expr").trim().to_owned(),
                yaml: rule.clone(),
            });
        }
    }
    out
}

const AGGREGATIONS: [&str; 12] = [
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
];
const LABEL_LIST_KEYWORDS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const OTHER_KEYWORDS: [&str; 8] = [
    "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan",
];

/// Index just past the end of the quoted string starting at `start`.
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() && bytes[i] != quote {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    i + 1
}

/// Index just past the group closed by `close` that opens at `start`, skipping strings.
fn skip_group(bytes: &[u8], start: usize, close: u8) -> usize {
    let open = bytes[start];
    let mut depth = 0;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' | b'`' => {
                i = skip_string(bytes, i);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

/// The metric names a query expression selects: identifiers outside strings, label matchers
/// and ranges that are neither functions, aggregations, keywords nor label lists.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let bytes = expr.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if matches!(c, b'"' | b'\'' | b'`') {
            i = skip_string(bytes, i);
        } else if c == b'{' {
            i = skip_group(bytes, i, b'}');
        } else if c == b'[' {
            i = skip_group(bytes, i, b']');
        } else if c.is_ascii_digit() || c == b'.' {
            // Numbers and durations (`0.99`, `5m`, `1e3`).
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
        } else if c == b'$' {
            // An unsubstituted template variable is not a metric.
            i += 1;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
        } else if is_ident_start(c) {
            let start = i;
            while i < bytes.len() && (is_ident_start(bytes[i]) || bytes[i].is_ascii_digit()) {
                i += 1;
            }
            let ident = &expr[start..i];
            let mut next = i;
            while next < bytes.len() && bytes[next].is_ascii_whitespace() {
                next += 1;
            }
            let call = next < bytes.len() && bytes[next] == b'(';
            let lower = ident.to_ascii_lowercase();
            if LABEL_LIST_KEYWORDS.contains(&lower.as_str()) {
                if call {
                    i = skip_group(bytes, next, b')');
                }
            } else if !(call
                || AGGREGATIONS.contains(&lower.as_str())
                || OTHER_KEYWORDS.contains(&lower.as_str()))
            {
                out.insert(ident.to_owned());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// A free TCP port on loopback (released again before it is returned).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

fn percent_encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// An HTTP/1.0 request (so that the answer is never chunked); returns status and body, or the
/// connection error.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    form: &[(&str, &str)],
) -> std::io::Result<(u16, String)> {
    let body = form
        .iter()
        .map(|(key, value)| format!("{}={}", percent_encode(key), percent_encode(value)))
        .collect::<Vec<_>>()
        .join("&");
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// Runs an instant query; returns the `data.result` array or the error Prometheus gave.
pub fn instant_query(addr: &str, query: &str) -> Result<Vec<Value>, String> {
    let (status, body) =
        http(addr, "POST", "/api/v1/query", &[("query", query)]).map_err(|e| e.to_string())?;
    let json: Value = serde_json::from_str(&body).map_err(|e| format!("{status}: {e}: {body}"))?;
    if json["status"] != "success" {
        return Err(format!("{status}: {body}"));
    }
    Ok(json["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// The sample values of an instant query result (vector or scalar).
pub fn sample_values(result: &[Value]) -> Vec<f64> {
    result
        .iter()
        .filter_map(|series| series["value"][1].as_str())
        .filter_map(|text| text.parse().ok())
        .collect()
}

/// The annotations of alert `name` as Prometheus renders them for `node` and `value`, as a
/// flow mapping (promtool compares every annotation).
pub fn annotations(name: &str, node: &str, value: &str) -> String {
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

/// Runs `promtool test rules` on the test file `tests` (YAML naming the rule files by absolute
/// path); fails the test with promtool's output when a case fails. Skipped loudly without
/// `promtool` (a failure under CI).
pub fn promtool_test_rules(tests: &str) {
    let Some(promtool) = testkit::require_tool(
        "promtool",
        "Debian's prometheus package provides promtool: apt-get install -y prometheus",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules_test.yaml");
    std::fs::write(&path, tests).unwrap();

    let output = std::process::Command::new(promtool)
        .args(["test", "rules", path.to_str().unwrap()])
        .output()
        .unwrap();

    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
