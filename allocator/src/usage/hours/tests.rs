#![allow(
    clippy::float_cmp,
    reason = "whole milliseconds weighted by quarters and halves of a device add up exactly"
)]

use proptest::prelude::*;

use super::*;
use crate::usage::{usage, usage_with_hours, UsageBy};

fn holding(uid: &str, from_ms: u64, to_ms: Option<u64>) -> HolderInterval {
    HolderInterval {
        node: "node-a".to_owned(),
        device: format!("gpu-{uid}"),
        model: None,
        claim_uid: uid.to_owned(),
        namespace: "team-a".to_owned(),
        name: format!("claim-{uid}"),
        from_ms,
        to_ms,
        share_permille: None,
    }
}

#[test]
fn an_interval_over_three_hours_fills_each_hour_with_its_part() {
    let hours = roll_up(&[holding("a", HOUR_MS / 2, Some(2 * HOUR_MS + 60_000))]);
    let parts: Vec<(u64, u64, u64, u64, u64, i64)> = hours
        .iter()
        .map(|h| {
            let r = &h.record;
            (
                h.hour_ms,
                r.device_permille_ms / 1000,
                r.claims_started,
                r.claims_carried,
                r.held_at_start_permille,
                r.held_at_end_permille(),
            )
        })
        .collect();
    assert_eq!(
        parts,
        [
            (0, HOUR_MS / 2, 1, 0, 0, 1000),
            (HOUR_MS, HOUR_MS, 0, 1, 1000, 1000),
            (2 * HOUR_MS, 60_000, 0, 1, 1000, 0),
        ]
    );
    assert!(roll_up(&[holding("open", 0, None)]).is_empty());
}

#[test]
fn hours_of_an_empty_or_reversed_span_are_none() {
    assert_eq!(hours_of(5, 5).count(), 0);
    assert_eq!(hours_of(HOUR_MS, 1).count(), 0);
    assert_eq!(hours_of(1, HOUR_MS + 1).collect::<Vec<_>>(), [0, HOUR_MS]);
    assert_eq!(hour_at_or_after(HOUR_MS), HOUR_MS);
    assert_eq!(hour_at_or_after(HOUR_MS + 1), 2 * HOUR_MS);
}

/// A claim: namespace, node, devices, start and length in seconds, share.
type ClaimSpec = (u8, u8, u8, u64, u64, Option<u32>, bool);

fn claims() -> impl Strategy<Value = Vec<ClaimSpec>> {
    prop::collection::vec(
        (
            0..2_u8,
            0..3_u8,
            1..4_u8,
            0..12 * 3600_u64,
            1..6 * 3600_u64,
            prop::option::of(prop::sample::select(vec![250_u32, 500])),
            any::<bool>(),
        ),
        0..25,
    )
}

fn intervals_of(specs: &[ClaimSpec]) -> Vec<(usize, HolderInterval, bool)> {
    let mut out = Vec::new();
    for (i, (namespace, node, devices, start, length, share, rolled)) in specs.iter().enumerate() {
        for device in 0..*devices {
            out.push((
                i,
                HolderInterval {
                    node: format!("node-{node}"),
                    device: format!("gpu-{device}"),
                    model: (*node != 2).then(|| format!("model-{}", node % 2)),
                    claim_uid: format!("uid-{i}"),
                    namespace: format!("team-{namespace}"),
                    name: format!("claim-{i}"),
                    from_ms: start * 1000,
                    to_ms: Some((start + length) * 1000),
                    share_permille: *share,
                },
                *rolled,
            ));
        }
    }
    out
}

proptest! {
    /// Whatever part of the history is rolled up, in whatever batches (a claim's intervals in
    /// one), usage over whole hours answers what the raw intervals answer.
    #[test]
    fn rolled_up_hours_answer_what_the_raw_intervals_answer_over_whole_hours(
        specs in claims(),
        first_hour in 0..10_u64,
        hours in 1..20_u64,
        batch_split in 0..25_usize,
    ) {
        let all = intervals_of(&specs);
        let raw_all: Vec<HolderInterval> = all.iter().map(|(_, i, _)| i.clone()).collect();
        let raw_left: Vec<HolderInterval> =
            all.iter().filter(|(_, _, rolled)| !rolled).map(|(_, i, _)| i.clone()).collect();
        let batch = |early: bool| -> Vec<HolderInterval> {
            all.iter()
                .filter(|(claim, _, rolled)| *rolled && (*claim < batch_split) == early)
                .map(|(_, i, _)| i.clone())
                .collect()
        };
        let mut merged: BTreeMap<(u64, String, String, Option<String>), HourRecord> =
            BTreeMap::new();
        for totals in roll_up(&batch(true)).into_iter().chain(roll_up(&batch(false))) {
            merged
                .entry((totals.hour_ms, totals.namespace, totals.node, totals.model))
                .or_default()
                .merge(totals.record);
        }
        let stored: Vec<HourTotals> = merged
            .into_iter()
            .map(|((hour_ms, namespace, node, model), record)| HourTotals {
                hour_ms, namespace, node, model, record,
            })
            .collect();
        let (from, to) = (first_hour * HOUR_MS, (first_hour + hours) * HOUR_MS);
        for by in [UsageBy::Namespace, UsageBy::Node, UsageBy::Model] {
            prop_assert_eq!(
                usage_with_hours(&raw_left, &stored, from, to, by),
                usage(&raw_all, from, to, by),
                "by {:?}", by
            );
        }
    }
}
