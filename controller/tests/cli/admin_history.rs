//! `dra-ledger admin usage`, `admin history` and `admin idle` against the admin router over the fixture
//! ledger of `admin.rs` (c1: two H100 of team-a, c3: one H100 of team-a, c2: one A100 of
//! team-b, all held since the server started).

use crate::admin::{assert_aligned, failure, stdout, Server};

#[test]
fn usage_table_has_a_row_per_namespace_and_the_total() {
    let server = Server::start(false);

    let text = stdout(&server.admin(&["usage", "--since", "1h"]));

    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("Usage from "), "{text}");
    assert_aligned(&lines[1..].join("\n"));
    assert_eq!(
        lines[1],
        "NAMESPACE   DEVICE-HOURS   DEVICE-SECONDS   CLAIMS   PEAK-DEVICES"
    );
    let rows: Vec<(&str, &str, &str)> = lines[2..]
        .iter()
        .map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            (cells[0], cells[3], cells[4])
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("team-a", "2", "3"),
            ("team-b", "1", "1"),
            ("total", "3", "4")
        ]
    );
}

#[test]
fn usage_by_node_as_json_and_by_model_as_csv() {
    let server = Server::start(false);

    let json: serde_json::Value = serde_json::from_str(&stdout(
        &server.admin(&["usage", "--by", "node", "-o", "json"]),
    ))
    .unwrap();
    let csv = stdout(&server.admin(&["usage", "--by", "model", "-o", "csv"]));

    assert_eq!(json["by"], "node");
    let nodes: Vec<(&str, u64)> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap(),
                r["peakDevices"].as_f64().unwrap() as u64,
            )
        })
        .collect();
    assert_eq!(nodes, [("node-a", 3), ("node-b", 1)]);
    let lines: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        lines[0],
        ["model", "deviceSeconds", "claims", "peakDevices"]
    );
    let keys: Vec<(&str, &str)> = lines[1..].iter().map(|l| (l[0], l[2])).collect();
    assert_eq!(keys, [("A100", "1"), ("H100", "2"), ("total", "3")]);
}

#[test]
fn history_names_the_holder_and_at_a_time_before_it_nobody() {
    let server = Server::start(false);
    let c1 = server.ledger.allocation("c1").unwrap().unwrap();
    let target = format!("node-a/{}", c1.devices[0]);

    let text = stdout(&server.admin(&["history", &target]));
    let now = chrono::Utc::now().to_rfc3339();
    let at_now = stdout(&server.admin(&["history", &target, "--at", &now]));
    let before = stdout(&server.admin(&["history", &target, "--at", "2000-01-01T00:00:00Z"]));

    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["CLAIM", "NAMESPACE/NAME", "FROM", "TO"]
    );
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        (cells[0], cells[1], cells[3]),
        ("c1", "team-a/claim-c1", "(held)")
    );
    assert!(text.contains("\nEvents\n"), "{text}");
    assert!(text.contains("added"), "{text}");
    assert_eq!(
        at_now.lines().nth(1).unwrap().split_whitespace().next(),
        Some("c1")
    );
    assert!(!at_now.contains("Events"), "{at_now}");
    assert_eq!(
        before,
        format!("No claim held {target} at 2000-01-01T00:00:00Z\n")
    );
}

#[test]
fn bad_history_and_usage_arguments_are_clear_errors() {
    let server = Server::start(false);

    let no_slash = failure(&server.admin(&["history", "gpu-0"]));
    let bad_time =
        failure(&server.admin(&["usage", "--from", "monday", "--to", "2026-01-01T00:00:00Z"]));
    let unknown = failure(&server.admin(&["history", "node-z/gpu-0"]));
    let csv_elsewhere = failure(&server.admin(&["nodes", "-o", "csv"]));

    assert!(
        no_slash.contains("expected NODE/DEVICE, got \"gpu-0\""),
        "{no_slash}"
    );
    assert!(
        bad_time.contains("--from must be an RFC 3339 time"),
        "{bad_time}"
    );
    assert!(
        unknown.contains("device gpu-0 of node node-z has no history in the ledger"),
        "{unknown}"
    );
    assert!(
        csv_elsewhere.contains("-o csv is only for `admin usage`"),
        "{csv_elsewhere}"
    );
}

#[test]
fn since_conflicts_with_from_and_help_documents_the_flags() {
    let server = Server::start(false);

    let both = server.admin(&[
        "usage",
        "--since",
        "7d",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-02T00:00:00Z",
    ]);
    let help = stdout(&server.admin(&["usage", "--help"]));
    let history_help = stdout(&server.admin(&["history", "--help"]));

    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"));
    for flag in ["--since", "--from", "--to", "--by", "csv"] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
    assert!(history_help.contains("--at"), "{history_help}");
    assert!(history_help.contains("NODE/DEVICE"), "{history_help}");
}

#[test]
fn idle_lists_the_claim_no_pod_uses_once_idle_for_longer_than_for() {
    let server = Server::start(false);
    std::thread::sleep(std::time::Duration::from_millis(1100));

    let text = stdout(&server.admin(&["idle", "--for", "1s"]));

    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0], "Claims no pod has used for longer than 1 s: 1",
        "{text}"
    );
    assert_aligned(&lines[1..].join("\n"));
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        ["NAMESPACE", "NAME", "NODE", "DEVICES", "IDLE-SINCE", "IDLE"]
    );
    let row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        &row[..4],
        ["team-a", "claim-c3", "node-a", "gpu-2"],
        "{text}"
    );
    assert!(row[4].ends_with('Z') && row[5].ends_with('s'), "{text}");

    let json: serde_json::Value =
        serde_json::from_str(&stdout(&server.admin(&["idle", "-o", "json"]))).unwrap();
    assert_eq!(json, serde_json::json!({"forSeconds": 600, "items": []}));
}

#[test]
fn idle_with_a_for_that_is_not_a_duration_is_refused() {
    let server = Server::start(false);

    let output = server.admin(&["idle", "--for", "soon"]);

    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a duration"), "{stderr}");
}
