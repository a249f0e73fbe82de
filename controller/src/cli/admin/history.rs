//! `dra-ledger admin usage`, `admin history` and `admin idle`: the request paths (windows as
//! RFC 3339 times, `--since` and `--at` turned into windows here) and the tables and CSV of the
//! answers.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};
use dra_api::v1::types::{DeviceHistoryView, IdleView, UsageRowView, UsageView};

use super::client::encode;
use super::table::{self, Table};

/// Groupings of `admin usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// The claim's namespace.
    Namespace,
    /// The device's node.
    Node,
    /// The device's `model` attribute.
    Model,
    /// The claim (namespace/name).
    Claim,
}

impl By {
    fn as_str(self) -> &'static str {
        match self {
            By::Namespace => "namespace",
            By::Node => "node",
            By::Model => "model",
            By::Claim => "claim",
        }
    }
}

fn rfc3339(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_time(flag: &str, text: &str) -> anyhow::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&Utc))
        .with_context(|| {
            format!("{flag} must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {text:?}")
        })
}

/// The path of `admin usage`: `--since D` is the window from D ago until `now`; `--from` and
/// `--to` are passed on (checked here first, so a typo is named with its flag); neither is the
/// server's default, the last 24 hours.
pub fn usage_path(
    since: Option<Duration>,
    from: Option<&str>,
    to: Option<&str>,
    by: By,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let mut path = format!("/v1/usage?by={}", by.as_str());
    let window = match (since, from, to) {
        (Some(since), _, _) => {
            let since = chrono::Duration::from_std(since).context("--since is too long")?;
            Some((rfc3339(now - since), rfc3339(now)))
        }
        (None, Some(from), Some(to)) => Some((
            rfc3339(parse_time("--from", from)?),
            rfc3339(parse_time("--to", to)?),
        )),
        _ => None,
    };
    if let Some((from, to)) = window {
        path = format!("{path}&from={}&to={}", encode(&from), encode(&to));
    }
    Ok(path)
}

/// The path of `admin history NODE/DEVICE`: the last 24 hours, or with `--at T` the window
/// `[T, T + 1 ms)`, which holds exactly the holder at `T`.
pub fn history_path(target: &str, at: Option<&str>) -> anyhow::Result<String> {
    let (node, device) = target
        .split_once('/')
        .filter(|(node, device)| !node.is_empty() && !device.is_empty())
        .with_context(|| format!("expected NODE/DEVICE, got {target:?}"))?;
    let mut path = format!(
        "/v1/nodes/{}/devices/{}/history",
        encode(node),
        encode(device)
    );
    if let Some(at) = at {
        let at = parse_time("--at", at)?;
        let to = at + chrono::Duration::milliseconds(1);
        path = format!(
            "{path}?from={}&to={}",
            encode(&rfc3339(at)),
            encode(&rfc3339(to))
        );
    }
    Ok(path)
}

fn number(value: f64) -> String {
    // Whole numbers without a fraction, others to three places.
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

fn usage_cells(row: &UsageRowView) -> Vec<String> {
    vec![
        row.key.clone(),
        format!("{:.2}", row.device_seconds / 3600.0),
        number(row.device_seconds),
        row.claims.to_string(),
        number(row.peak_devices),
    ]
}

/// `admin usage`: the window, then one row per group and the total.
pub fn usage_table(view: &UsageView) -> String {
    let mut table = Table::new(&[
        &view.by,
        "device-hours",
        "device-seconds",
        "claims",
        "peak-devices",
    ]);
    for row in &view.rows {
        table.row(usage_cells(row));
    }
    table.row(usage_cells(&view.total));
    let rolled_up = if view.by == "claim" {
        "claims whose intervals ended before then are not listed"
    } else {
        "older intervals count by whole hours"
    };
    format!(
        "Usage from {} to {} (rolled up before {}: {rolled_up})\n{}",
        view.from,
        view.to,
        view.rolled_up_before,
        table.render()
    )
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// `admin usage -o csv`: a header, one line per group and the total (key `total`).
pub fn usage_csv(view: &UsageView) -> String {
    let mut out = format!("{},deviceSeconds,claims,peakDevices\n", view.by);
    for row in view.rows.iter().chain([&view.total]) {
        let _ = writeln!(
            out,
            "{},{},{},{}",
            csv_field(&row.key),
            row.device_seconds,
            row.claims,
            row.peak_devices
        );
    }
    out
}

/// `admin history`: the holders, then the events; with `--at`, only who held the device then.
pub fn history_table(target: &str, at: Option<&str>, view: &DeviceHistoryView) -> String {
    let mut holders = Table::new(&["claim", "namespace/name", "from", "to"]);
    for holder in &view.holders {
        holders.row(vec![
            holder.claim_uid.clone(),
            format!("{}/{}", holder.namespace, holder.name),
            holder.from.clone(),
            holder.to.clone().unwrap_or_else(|| "(held)".to_owned()),
        ]);
    }
    if let Some(at) = at {
        if view.holders.is_empty() {
            return format!("No claim held {target} at {at}\n");
        }
        return holders.render();
    }
    let mut text = if view.holders.is_empty() {
        format!("No claim held {target} in the last 24 hours\n")
    } else {
        holders.render()
    };
    if !view.events.is_empty() {
        let mut events = Table::new(&["time", "event", "detail"]);
        for event in &view.events {
            events.row(vec![
                event.time.clone(),
                event.kind.clone(),
                event.detail.clone(),
            ]);
        }
        text.push_str("\nEvents\n");
        text.push_str(&events.render());
    }
    text
}

/// `admin idle`: the threshold, then one row per idle claim, longest idle first.
pub fn idle_table(view: &IdleView) -> String {
    let mut out = Table::new(&["namespace", "name", "node", "devices", "idle-since", "idle"]);
    for item in &view.items {
        out.row(vec![
            item.namespace.clone(),
            item.name.clone(),
            item.node.clone(),
            table::list(&item.devices),
            item.idle_since.clone(),
            table::age(item.idle_seconds * 1000, 0),
        ]);
    }
    format!(
        "Claims no pod has used for longer than {} s: {}\n{}",
        view.for_seconds,
        view.items.len(),
        out.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        parse_time("test", text).unwrap()
    }

    #[test]
    fn since_is_the_window_until_now_and_from_to_are_checked_and_passed_on() {
        let now = at("2026-01-08T00:00:00Z");
        let week = Duration::from_secs(7 * 24 * 3600);
        assert_eq!(
            usage_path(Some(week), None, None, By::Node, now).unwrap(),
            "/v1/usage?by=node&from=2026-01-01T00%3A00%3A00.000Z&to=2026-01-08T00%3A00%3A00.000Z"
        );
        assert_eq!(
            usage_path(None, None, None, By::Namespace, now).unwrap(),
            "/v1/usage?by=namespace"
        );
        let error = usage_path(
            None,
            Some("monday"),
            Some("2026-01-01T00:00:00Z"),
            By::Model,
            now,
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("--from must be an RFC 3339 time"),
            "{error}"
        );
    }

    #[test]
    fn history_at_asks_for_one_millisecond_and_a_bad_target_is_named() {
        assert_eq!(
            history_path("node-a/gpu-0", Some("2026-01-01T00:01:00+01:00")).unwrap(),
            "/v1/nodes/node-a/devices/gpu-0/history\
             ?from=2025-12-31T23%3A01%3A00.000Z&to=2025-12-31T23%3A01%3A00.001Z"
        );
        let error = history_path("gpu-0", None).unwrap_err();
        assert_eq!(error.to_string(), "expected NODE/DEVICE, got \"gpu-0\"");
    }

    #[test]
    fn csv_quotes_keys_with_commas_and_ends_with_the_total() {
        let row = |key: &str, seconds| UsageRowView {
            key: key.to_owned(),
            device_seconds: seconds,
            claims: 1,
            peak_devices: 1.0,
        };
        let view = UsageView {
            from: String::new(),
            to: String::new(),
            by: "claim".to_owned(),
            rows: vec![row("ns/a,b", 1.5)],
            total: row("total", 1.5),
            rolled_up_before: String::new(),
        };
        assert_eq!(
            usage_csv(&view),
            "claim,deviceSeconds,claims,peakDevices\n\"ns/a,b\",1.5,1,1\ntotal,1.5,1,1\n"
        );
    }
}
