#![allow(
    clippy::float_cmp,
    reason = "device-seconds of whole milliseconds and shares in thousandths compare exactly"
)]

use super::*;

const HOUR: u64 = 3_600_000;

fn held(
    namespace: &str,
    uid: &str,
    node: &str,
    device: &str,
    from: u64,
    to: Option<u64>,
) -> HolderInterval {
    HolderInterval {
        node: node.to_owned(),
        device: device.to_owned(),
        model: Some("H100".to_owned()),
        claim_uid: uid.to_owned(),
        namespace: namespace.to_owned(),
        name: format!("claim-{uid}"),
        from_ms: from,
        to_ms: to,
        share_permille: None,
    }
}

fn row<'a>(usage: &'a Usage, key: &str) -> &'a UsageRow {
    usage
        .rows
        .iter()
        .find(|row| row.key == key)
        .unwrap_or_else(|| panic!("no row {key} in {usage:?}"))
}

#[test]
fn intervals_are_clipped_to_the_window_to_the_second() {
    // Held from 30 minutes before the window to 90 seconds into it, and from 10 seconds before
    // its end on, still open.
    let intervals = [
        held(
            "team-a",
            "a",
            "node-a",
            "gpu-0",
            HOUR - 1_800_000,
            Some(2 * HOUR + 90_000),
        ),
        held("team-a", "b", "node-a", "gpu-1", 3 * HOUR - 10_000, None),
    ];

    let usage = usage(&intervals, 2 * HOUR, 3 * HOUR, UsageBy::Namespace);

    let team = row(&usage, "team-a");
    assert_eq!(team.device_seconds, 90.0 + 10.0);
    assert_eq!(team.claims, 2);
    assert_eq!(team.peak_devices, 1.0);
    assert_eq!(usage.total.device_seconds, 100.0);
}

#[test]
fn intervals_outside_the_window_count_for_nothing() {
    let intervals = [
        held("team-a", "a", "node-a", "gpu-0", 0, Some(HOUR)),
        held("team-b", "b", "node-a", "gpu-0", 2 * HOUR, None),
    ];

    let usage = usage(&intervals, HOUR, 2 * HOUR, UsageBy::Namespace);

    assert!(usage.rows.is_empty(), "{usage:?}");
    assert_eq!(usage.total.device_seconds, 0.0);
    assert_eq!(usage.total.claims, 0);
}

#[test]
fn rows_group_by_namespace_node_model_and_claim() {
    let mut h200 = held("team-b", "c", "node-b", "gpu-0", 0, Some(60_000));
    h200.model = Some("H200".to_owned());
    let intervals = [
        held("team-a", "a", "node-a", "gpu-0", 0, Some(30_000)),
        held("team-a", "a", "node-a", "gpu-1", 0, Some(30_000)),
        held("team-b", "b", "node-a", "gpu-2", 10_000, Some(20_000)),
        h200,
    ];
    let window = |by| usage(&intervals, 0, HOUR, by);

    let by_namespace = window(UsageBy::Namespace);
    assert_eq!(row(&by_namespace, "team-a").device_seconds, 60.0);
    assert_eq!(row(&by_namespace, "team-a").claims, 1);
    assert_eq!(row(&by_namespace, "team-a").peak_devices, 2.0);
    assert_eq!(row(&by_namespace, "team-b").device_seconds, 70.0);
    assert_eq!(row(&by_namespace, "team-b").claims, 2);

    let by_node = window(UsageBy::Node);
    assert_eq!(row(&by_node, "node-a").device_seconds, 70.0);
    assert_eq!(row(&by_node, "node-a").peak_devices, 3.0);
    assert_eq!(row(&by_node, "node-b").device_seconds, 60.0);

    let by_model = window(UsageBy::Model);
    assert_eq!(row(&by_model, "H100").device_seconds, 70.0);
    assert_eq!(row(&by_model, "H200").device_seconds, 60.0);

    let by_claim = window(UsageBy::Claim);
    assert_eq!(row(&by_claim, "team-a/claim-a").device_seconds, 60.0);
    assert_eq!(by_claim.rows.len(), 3);
    assert_eq!(by_claim.total.device_seconds, 130.0);
    assert_eq!(by_claim.total.claims, 3);
    assert_eq!(by_claim.total.peak_devices, 4.0);
}

#[test]
fn back_to_back_holders_of_one_device_peak_at_one() {
    let intervals = [
        held("team-a", "a", "node-a", "gpu-0", 0, Some(10_000)),
        held("team-a", "b", "node-a", "gpu-0", 10_000, Some(20_000)),
    ];

    let usage = usage(&intervals, 0, HOUR, UsageBy::Node);

    assert_eq!(row(&usage, "node-a").peak_devices, 1.0);
    assert_eq!(row(&usage, "node-a").device_seconds, 20.0);
}

#[test]
fn shares_are_weighted_by_their_fraction_and_whole_sharers_count_once_each() {
    let mut quarter = held("team-a", "a", "node-a", "gpu-0", 0, Some(40_000));
    quarter.share_permille = Some(250);
    let mut half = held("team-b", "b", "node-a", "gpu-0", 0, Some(40_000));
    half.share_permille = Some(500);
    let whole = held("team-c", "c", "node-a", "gpu-0", 0, Some(40_000));

    let usage = usage(&[quarter, half, whole], 0, HOUR, UsageBy::Namespace);

    assert_eq!(row(&usage, "team-a").device_seconds, 10.0);
    assert_eq!(row(&usage, "team-a").peak_devices, 0.25);
    assert_eq!(row(&usage, "team-b").device_seconds, 20.0);
    assert_eq!(row(&usage, "team-c").device_seconds, 40.0);
    assert_eq!(usage.total.device_seconds, 70.0);
    assert_eq!(usage.total.peak_devices, 1.75);
}

#[test]
fn a_model_less_device_groups_as_unknown() {
    let mut bare = held("team-a", "a", "node-a", "gpu-0", 0, Some(1_000));
    bare.model = None;

    let usage = usage(&[bare], 0, HOUR, UsageBy::Model);

    assert_eq!(row(&usage, "unknown").device_seconds, 1.0);
}

#[test]
fn grouping_names_parse_and_unknown_ones_are_refused() {
    assert_eq!("claim".parse::<UsageBy>(), Ok(UsageBy::Claim));
    let error = "team".parse::<UsageBy>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown grouping \"team\": expected namespace, node, model or claim"
    );
}
