//! Usage accounting over holder intervals: how many device-seconds each namespace, node, model
//! or claim used inside a window, how many claims that was and the most devices held at once.
//!
//! History older than the ledger's rollup horizon arrives as hourly totals per namespace, node
//! and model ([`hours`]) instead of intervals: it counts by whole hours (an hour counts when it
//! starts inside the window) and is invisible to the grouping by claim.
//!
//! Pure: no I/O, no clock; the ledger (`ledger::history`) reads the intervals and hours, this
//! module only computes. Must not depend on `ledger`, redb, tokio or kube.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use hours::{HourTotals, HOUR_MS};

pub mod hours;

/// One claim holding one device from `from_ms` until `to_ms` (`None`: still held).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HolderInterval {
    /// The node of the device.
    pub node: String,
    /// The device.
    pub device: String,
    /// The device's `model` attribute, when it publishes one.
    pub model: Option<String>,
    /// The claim UID.
    pub claim_uid: String,
    /// The claim namespace.
    pub namespace: String,
    /// The claim name.
    pub name: String,
    /// Unix milliseconds when the claim got the device.
    pub from_ms: u64,
    /// Unix milliseconds when the claim gave it back; `None` while held.
    pub to_ms: Option<u64>,
    /// The fraction of the device the claim holds, in thousandths; `None` for the whole device
    /// (an exclusive holder, or a sharing holder whose allocation records no fraction).
    pub share_permille: Option<u32>,
}

impl HolderInterval {
    /// The part of the interval inside `[from_ms, to_ms)` as `(start, end)`; `None` when they do
    /// not overlap. An open interval counts as held until the window's end.
    pub fn clip(&self, from_ms: u64, to_ms: u64) -> Option<(u64, u64)> {
        let start = self.from_ms.max(from_ms);
        let end = self.to_ms.unwrap_or(u64::MAX).min(to_ms);
        (start < end).then_some((start, end))
    }

    /// The device weight of the holder: 1 for a whole device, its fraction for a share.
    pub fn weight(&self) -> f64 {
        self.share_permille
            .map_or(1.0, |permille| f64::from(permille) / 1000.0)
    }
}

/// What usage is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UsageBy {
    /// The claim's namespace.
    Namespace,
    /// The device's node.
    Node,
    /// The device's `model` attribute (`unknown` without one).
    Model,
    /// The claim, as `namespace/name`.
    Claim,
}

/// An unknown grouping name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown grouping {0:?}: expected namespace, node, model or claim")]
pub struct UnknownGrouping(pub String);

impl std::str::FromStr for UsageBy {
    type Err = UnknownGrouping;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "namespace" => Ok(UsageBy::Namespace),
            "node" => Ok(UsageBy::Node),
            "model" => Ok(UsageBy::Model),
            "claim" => Ok(UsageBy::Claim),
            other => Err(UnknownGrouping(other.to_owned())),
        }
    }
}

/// The usage of one group inside the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    /// The group: a namespace, node, model or `namespace/name`.
    pub key: String,
    /// Device-seconds used, shares weighted by their fraction.
    pub device_seconds: f64,
    /// Distinct claims that held a device of the group.
    pub claims: u64,
    /// The most devices the group held at one time, shares weighted by their fraction.
    pub peak_devices: f64,
}

/// Usage inside a window: one row per group by key, and the total over all of them (its peak is
/// the most devices held at one time by all groups together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// One row per group, by key.
    pub rows: Vec<UsageRow>,
    /// All groups together; its key is `total`.
    pub total: UsageRow,
}

fn group_key(interval: &HolderInterval, by: UsageBy) -> String {
    match by {
        UsageBy::Namespace => interval.namespace.clone(),
        UsageBy::Node => interval.node.clone(),
        UsageBy::Model => model_key(interval.model.as_ref()),
        UsageBy::Claim => format!("{}/{}", interval.namespace, interval.name),
    }
}

fn model_key(model: Option<&String>) -> String {
    model.cloned().unwrap_or_else(|| "unknown".to_owned())
}

/// The group of an hour's totals; `None` for the grouping by claim, which hours do not carry.
fn hour_key(hour: &HourTotals, by: UsageBy) -> Option<String> {
    match by {
        UsageBy::Namespace => Some(hour.namespace.clone()),
        UsageBy::Node => Some(hour.node.clone()),
        UsageBy::Model => Some(model_key(hour.model.as_ref())),
        UsageBy::Claim => None,
    }
}

/// Accumulates one group: seconds, claims and the changes of held devices over time.
#[derive(Default)]
struct Group<'a> {
    device_ms: f64,
    claims: std::collections::BTreeSet<&'a str>,
    /// Claims counted from hourly totals (each is in no interval).
    hour_claims: u64,
    /// (time, +weight at a start, -weight at an end).
    steps: Vec<(u64, f64)>,
}

impl<'a> Group<'a> {
    fn add(&mut self, interval: &'a HolderInterval, start: u64, end: u64) {
        let weight = interval.weight();
        // Window times are unix milliseconds, far below 2^52: the conversion is exact.
        self.device_ms += (end - start) as f64 * weight;
        self.claims.insert(&interval.claim_uid);
        self.steps.push((start, weight));
        self.steps.push((end, -weight));
    }

    /// Adds an hour's totals; `first_hour` is the first hour of the window, the only one whose
    /// carried claims are new to the window.
    fn add_hour(&mut self, hour: &HourTotals, first_hour: u64) {
        let record = &hour.record;
        let thousandths = |permille: i64| permille as f64 / 1000.0;
        self.device_ms += record.device_permille_ms as f64 / 1000.0;
        self.hour_claims += record.claims_started;
        if hour.hour_ms == first_hour {
            self.hour_claims += record.claims_carried;
        }
        let start = i64::try_from(record.held_at_start_permille).unwrap_or(i64::MAX);
        self.steps.push((hour.hour_ms, thousandths(start)));
        for change in &record.changes {
            self.steps.push((
                hour.hour_ms + u64::from(change.offset_ms),
                thousandths(change.permille),
            ));
        }
        self.steps.push((
            hour.hour_ms + HOUR_MS,
            -thousandths(record.held_at_end_permille()),
        ));
    }

    fn row(mut self, key: String) -> UsageRow {
        // At equal times an end sorts before a start: back-to-back holders do not overlap.
        self.steps
            .sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let (mut held, mut peak) = (0.0_f64, 0.0_f64);
        for (_, change) in &self.steps {
            held += change;
            peak = peak.max(held);
        }
        UsageRow {
            key,
            device_seconds: self.device_ms / 1000.0,
            claims: self.claims.len() as u64 + self.hour_claims,
            peak_devices: peak,
        }
    }
}

/// The usage of `intervals` inside `[from_ms, to_ms)`, grouped `by`. Intervals are clipped to
/// the window; ones outside it count for nothing; an empty window has no rows.
pub fn usage(intervals: &[HolderInterval], from_ms: u64, to_ms: u64, by: UsageBy) -> Usage {
    usage_with_hours(intervals, &[], from_ms, to_ms, by)
}

/// [`usage`] over intervals and the hourly totals of history rolled up out of them: an hour
/// counts whole when it starts inside `[from_ms, to_ms)`, and not at all for the grouping by
/// claim. Over hour-aligned windows the answer equals that of the intervals the hours came from.
pub fn usage_with_hours(
    intervals: &[HolderInterval],
    hours: &[HourTotals],
    from_ms: u64,
    to_ms: u64,
    by: UsageBy,
) -> Usage {
    let mut groups: BTreeMap<String, Group<'_>> = BTreeMap::new();
    let mut total = Group::default();
    for interval in intervals {
        let Some((start, end)) = interval.clip(from_ms, to_ms) else {
            continue;
        };
        groups
            .entry(group_key(interval, by))
            .or_default()
            .add(interval, start, end);
        total.add(interval, start, end);
    }
    let first_hour = hours::hour_at_or_after(from_ms);
    for hour in hours {
        if hour.hour_ms < from_ms || hour.hour_ms >= to_ms {
            continue;
        }
        let Some(key) = hour_key(hour, by) else {
            continue;
        };
        groups.entry(key).or_default().add_hour(hour, first_hour);
        total.add_hour(hour, first_hour);
    }
    Usage {
        rows: groups
            .into_iter()
            .map(|(key, group)| group.row(key))
            .collect(),
        total: total.row("total".to_owned()),
    }
}

#[cfg(test)]
mod tests;
