//! The hourly rollup (schema version 5) on a ledger aged by a hand-moved clock: once intervals
//! are older than the rollup age, usage from the hourly totals equals the answer of the raw
//! intervals to the second (by namespace, node and model), also while the rollup is partway;
//! the grouping by claim and device history keep only what is still raw; hours older than the
//! retention are dropped and intervals still open stay.

#![allow(
    clippy::float_cmp,
    reason = "device-seconds of whole milliseconds compare exactly"
)]

use dra_allocator::ledger::{Ledger, LedgerOptions};
use dra_allocator::usage::{Usage, UsageBy};
use testkit::ledger::{allocate_on, assert_consistent, gpus, ManualClock, DRIVER};

use crate::support::raw_uids;

/// 2026-01-01T00:00:00Z, an hour start.
const T0: u64 = 1_767_225_600_000;
const MINUTE: u64 = 60;
const HOUR_MS: u64 = 3_600_000;
const DAY: u64 = 24 * 3600;

fn ledger_at(options: LedgerOptions) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open_with(dir.path().join("ledger.redb"), DRIVER, options).unwrap();
    ledger.set_inventory("node-a", gpus(4, "H100")).unwrap();
    ledger.set_inventory("node-b", gpus(2, "H200")).unwrap();
    (dir, ledger)
}

const GROUPINGS: [UsageBy; 3] = [UsageBy::Namespace, UsageBy::Node, UsageBy::Model];

/// Each grouping's usage over `[from, to)`.
fn answers(ledger: &Ledger, from: u64, to: u64) -> Vec<Usage> {
    GROUPINGS
        .iter()
        .map(|by| ledger.usage(from, to, *by).unwrap())
        .collect()
}

/// Claims on known intervals in the first hours after `T0`, on an hour-aligned clock:
/// `kept` (team-a, node-a) from 00:05 and never released; `a` (team-a, node-a) 00:10-02:30;
/// `b` (team-b, two devices of node-b) 00:20-00:50; `c` (team-a, node-a) 01:00-03:15.
fn drive_first_hours(clock: &ManualClock, ledger: &Ledger) {
    clock.advance_secs(5 * MINUTE);
    allocate_on(ledger, "kept", "team-a", "node-a", 1);
    clock.advance_secs(5 * MINUTE);
    allocate_on(ledger, "a", "team-a", "node-a", 1);
    clock.advance_secs(10 * MINUTE);
    allocate_on(ledger, "b", "team-b", "node-b", 2);
    clock.advance_secs(30 * MINUTE);
    ledger.release("b").unwrap();
    clock.advance_secs(10 * MINUTE);
    allocate_on(ledger, "c", "team-a", "node-a", 1);
    clock.advance_secs(90 * MINUTE);
    ledger.release("a").unwrap();
    clock.advance_secs(45 * MINUTE);
    ledger.release("c").unwrap();
    clock.advance_secs(45 * MINUTE);
}

#[test]
fn rolled_up_hours_answer_the_same_usage_as_the_raw_intervals_to_the_second() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());
    drive_first_hours(&clock, &ledger);
    let window = (T0, T0 + 4 * HOUR_MS);
    let raw = answers(&ledger, window.0, window.1);
    let team_a = &raw[0].rows[0];
    // a 140 min, c 135 min, kept 235 min; peak 3 from 01:00 to 02:30.
    assert_eq!(team_a.key, "team-a");
    assert_eq!(team_a.device_seconds, f64::from((140 + 135 + 235) * 60));
    assert_eq!((team_a.claims, team_a.peak_devices), (3, 3.0));
    assert_eq!(raw_uids(&ledger), ["a", "b", "c", "kept"]);

    // Eight days later the next commit rolls the ended intervals up.
    clock.advance_secs(8 * DAY);
    ledger.cordon("node-b", "gpu-1").unwrap();

    assert_eq!(
        raw_uids(&ledger),
        ["kept"],
        "only the open interval stays raw"
    );
    assert_eq!(answers(&ledger, window.0, window.1), raw);
    let day = answers(&ledger, T0, T0 + 24 * HOUR_MS);
    assert_eq!(
        day[1].total.device_seconds,
        raw[1].total.device_seconds + 20.0 * 3600.0
    );
    let by_claim = ledger.usage(window.0, window.1, UsageBy::Claim).unwrap();
    let claims: Vec<&str> = by_claim.rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        claims,
        ["team-a/claim-kept"],
        "by claim sees only what is raw"
    );
    let node_b = ledger
        .device_history("node-b", "gpu-0", 0, u64::MAX)
        .unwrap()
        .unwrap();
    assert!(node_b.holders.is_empty(), "{node_b:?}");
    assert_eq!(node_b.events.len(), 1, "its publication stays: {node_b:?}");
    assert_eq!(
        ledger.history_rolled_up_before(),
        clock.now_ms() - 7 * DAY * 1000
    );
    assert_consistent(&ledger);
}

#[test]
fn hours_that_start_before_the_window_do_not_count() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());
    drive_first_hours(&clock, &ledger);
    let from_the_first_whole_hour = answers(&ledger, T0 + HOUR_MS, T0 + 4 * HOUR_MS);
    let raw_from_00_30 = answers(&ledger, T0 + 30 * 60_000, T0 + 4 * HOUR_MS);
    assert_ne!(from_the_first_whole_hour, raw_from_00_30);

    clock.advance_secs(8 * DAY);
    ledger.cordon("node-b", "gpu-1").unwrap();

    // `kept` is still raw and counts to the minute; the rolled-up claims count from 01:00.
    let rolled = answers(&ledger, T0 + 30 * 60_000, T0 + 4 * HOUR_MS);
    let team_a = &rolled[0].rows[0];
    assert_eq!(
        team_a.device_seconds,
        f64::from((90 + 135 + 210) * 60),
        "a from 01:00 to 02:30, c whole, kept from 00:30"
    );
    assert_eq!(team_a.claims, 3);
    assert_eq!(
        rolled[0].rows.len(),
        1,
        "team-b's hour began before the window"
    );
}

#[test]
fn usage_stays_exact_while_the_rollup_works_through_a_backlog_in_bounded_batches() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());
    for i in 0..150 {
        let namespace = if i % 3 == 0 { "team-b" } else { "team-a" };
        let node = if i % 2 == 0 { "node-a" } else { "node-b" };
        allocate_on(&ledger, &format!("claim-{i}"), namespace, node, 1);
        clock.advance_secs(7 * MINUTE);
        ledger.release(&format!("claim-{i}")).unwrap();
    }
    let window = (T0, T0 + 18 * HOUR_MS);
    let raw = answers(&ledger, window.0, window.1);
    assert_eq!(raw[0].total.claims, 150);

    clock.advance_secs(8 * DAY);
    let mut left = raw_uids(&ledger).len();
    let mut commits = 0;
    while left > 0 {
        ledger.cordon("node-a", "gpu-0").unwrap();
        ledger.uncordon("node-a", "gpu-0").unwrap();
        commits += 1;
        let now_left = raw_uids(&ledger).len();
        assert!(now_left < left, "every commit makes progress");
        assert!(
            left - now_left <= 2 * 65,
            "at most a bounded number per commit"
        );
        left = now_left;
        assert_eq!(
            answers(&ledger, window.0, window.1),
            raw,
            "after {commits} commits"
        );
    }
    assert!(commits > 1, "the backlog took more than one commit");
    assert_consistent(&ledger);
}

#[test]
fn hours_older_than_the_retention_are_dropped_and_open_intervals_stay() {
    let clock = ManualClock::at(T0);
    let (_dir, ledger) = ledger_at(clock.options());
    drive_first_hours(&clock, &ledger);
    clock.advance_secs(8 * DAY);
    ledger.cordon("node-b", "gpu-1").unwrap();
    let window = (T0, T0 + 4 * HOUR_MS);
    assert_eq!(
        ledger
            .usage(window.0, window.1, UsageBy::Namespace)
            .unwrap()
            .rows
            .len(),
        2
    );

    // 90 days after those hours ended, the next commit drops them.
    clock.advance_secs(83 * DAY);
    ledger.uncordon("node-b", "gpu-1").unwrap();

    let usage = ledger
        .usage(window.0, window.1, UsageBy::Namespace)
        .unwrap();
    let rows: Vec<(&str, f64, u64)> = usage
        .rows
        .iter()
        .map(|row| (row.key.as_str(), row.device_seconds, row.claims))
        .collect();
    assert_eq!(
        rows,
        [("team-a", f64::from(235 * 60), 1)],
        "only kept's open interval"
    );
    assert_eq!(raw_uids(&ledger), ["kept"]);
    assert_consistent(&ledger);
}
