//! Hourly totals of holder intervals: what the ledger keeps of an interval once it is rolled up
//! (device time, claims and the changes of held devices inside each hour of one namespace, node
//! and model), and how an interval spreads over hours.
//!
//! Pure: no I/O, no clock. The ledger stores [`HourRecord`] and feeds [`HourTotals`] back to
//! [`super::usage_with_hours`]. Must not depend on `ledger`, redb, tokio or kube.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::HolderInterval;

/// One hour in unix milliseconds.
pub const HOUR_MS: u64 = 3_600_000;

/// A whole device in thousandths.
const WHOLE_PERMILLE: u64 = 1000;

/// The start of the hour that holds `at_ms`.
pub fn hour_of(at_ms: u64) -> u64 {
    at_ms - at_ms % HOUR_MS
}

/// The first hour start at or after `at_ms`.
pub fn hour_at_or_after(at_ms: u64) -> u64 {
    hour_of(at_ms.saturating_add(HOUR_MS - 1))
}

/// The starts of the hours that `[from_ms, to_ms)` overlaps, oldest first.
pub fn hours_of(from_ms: u64, to_ms: u64) -> impl Iterator<Item = u64> {
    (from_ms < to_ms)
        .then(|| (hour_of(from_ms)..to_ms).step_by(usize::try_from(HOUR_MS).unwrap_or(usize::MAX)))
        .into_iter()
        .flatten()
}

/// A change of the devices held inside an hour: `permille` thousandths of a device taken
/// (positive) or given back (negative) `offset_ms` after the hour's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldChange {
    /// Milliseconds after the hour's start.
    pub offset_ms: u32,
    /// Thousandths of a device, positive when taken.
    pub permille: i64,
}

/// The totals of one hour of one namespace, node and model (stored: the layout is file format).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HourRecord {
    /// Device-milliseconds held inside the hour, in thousandths of a device.
    pub device_permille_ms: u64,
    /// Claims whose holding began inside the hour.
    pub claims_started: u64,
    /// Claims already holding when the hour began.
    pub claims_carried: u64,
    /// Thousandths of a device held when the hour began.
    pub held_at_start_permille: u64,
    /// The changes of held devices inside the hour, in the order they were added.
    pub changes: Vec<HeldChange>,
}

impl HourRecord {
    /// Adds the part of a holding of `permille` thousandths of a device over `[from_ms, to_ms)`
    /// that falls inside the hour starting at `hour_ms`.
    pub fn add_holding(&mut self, hour_ms: u64, from_ms: u64, to_ms: u64, permille: u64) {
        let end_of_hour = hour_ms + HOUR_MS;
        let (start, end) = (from_ms.max(hour_ms), to_ms.min(end_of_hour));
        if start >= end {
            return;
        }
        self.device_permille_ms += (end - start) * permille;
        let signed = i64::try_from(permille).unwrap_or(i64::MAX);
        if from_ms < hour_ms {
            self.held_at_start_permille += permille;
        } else {
            self.changes.push(change(from_ms - hour_ms, signed));
        }
        if to_ms < end_of_hour {
            self.changes.push(change(to_ms - hour_ms, -signed));
        }
    }

    /// Counts a claim that held devices of this hour's group from `from_ms` on.
    pub fn add_claim(&mut self, hour_ms: u64, from_ms: u64) {
        if from_ms < hour_ms {
            self.claims_carried += 1;
        } else {
            self.claims_started += 1;
        }
    }

    /// Adds the totals of the same hour and group rolled up in another batch: every field is
    /// a sum over the intervals, so the order of batches does not matter.
    pub fn merge(&mut self, other: HourRecord) {
        self.device_permille_ms += other.device_permille_ms;
        self.claims_started += other.claims_started;
        self.claims_carried += other.claims_carried;
        self.held_at_start_permille += other.held_at_start_permille;
        self.changes.extend(other.changes);
    }

    /// Thousandths of a device still held when the hour ends.
    pub fn held_at_end_permille(&self) -> i64 {
        let start = i64::try_from(self.held_at_start_permille).unwrap_or(i64::MAX);
        start + self.changes.iter().map(|c| c.permille).sum::<i64>()
    }
}

fn change(offset_ms: u64, permille: i64) -> HeldChange {
    HeldChange {
        // Offsets are below one hour, far below `u32::MAX`.
        offset_ms: u32::try_from(offset_ms).unwrap_or(u32::MAX),
        permille,
    }
}

/// The hourly totals of ended intervals (open ones are skipped), per hour, namespace, node
/// and model, oldest hour first. A claim counts once per group and hour, over the span of its
/// intervals there; the intervals of one claim must come in one call to count it once.
pub fn roll_up(intervals: &[HolderInterval]) -> Vec<HourTotals> {
    /// An hour start or a claim UID, then namespace, node and model.
    type Group<'a, T> = (T, &'a str, &'a str, Option<&'a str>);
    let mut hours: BTreeMap<Group<'_, u64>, HourRecord> = BTreeMap::new();
    let mut claims: BTreeMap<Group<'_, &str>, (u64, u64)> = BTreeMap::new();
    for interval in intervals {
        let Some(to_ms) = interval.to_ms else {
            continue;
        };
        let (namespace, node) = (interval.namespace.as_str(), interval.node.as_str());
        let model = interval.model.as_deref();
        for hour in hours_of(interval.from_ms, to_ms) {
            hours
                .entry((hour, namespace, node, model))
                .or_default()
                .add_holding(
                    hour,
                    interval.from_ms,
                    to_ms,
                    permille_of(interval.share_permille),
                );
        }
        if interval.from_ms < to_ms {
            let span = claims
                .entry((&interval.claim_uid, namespace, node, model))
                .or_insert((interval.from_ms, to_ms));
            *span = (span.0.min(interval.from_ms), span.1.max(to_ms));
        }
    }
    for ((_, namespace, node, model), (from_ms, to_ms)) in claims {
        for hour in hours_of(from_ms, to_ms) {
            if let Some(record) = hours.get_mut(&(hour, namespace, node, model)) {
                record.add_claim(hour, from_ms);
            }
        }
    }
    hours
        .into_iter()
        .map(|((hour_ms, namespace, node, model), record)| HourTotals {
            hour_ms,
            namespace: namespace.to_owned(),
            node: node.to_owned(),
            model: model.map(str::to_owned),
            record,
        })
        .collect()
}

/// The weight of a holding in thousandths: its share, or a whole device.
pub fn permille_of(share_permille: Option<u32>) -> u64 {
    share_permille.map_or(WHOLE_PERMILLE, u64::from)
}

/// One hour's totals of one namespace, node and model, as read back from the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HourTotals {
    /// The hour's start, unix milliseconds.
    pub hour_ms: u64,
    /// The claims' namespace.
    pub namespace: String,
    /// The devices' node.
    pub node: String,
    /// The devices' `model` attribute, when they published one.
    pub model: Option<String>,
    /// What was held inside the hour.
    pub record: HourRecord,
}

#[cfg(test)]
mod tests;
