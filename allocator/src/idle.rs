//! Idle allocations: which allocated claims no running pod uses, and since when.
//!
//! The observers of both generations (the `v1alpha2` controller's claim informer, the `v1`
//! mirror's claim watch) report each claim they see as [`ClaimUse`]: unallocated, allocated
//! and reserved for a consumer, or allocated with `status.reservedFor` empty. `reservedFor`
//! alone decides: Kubernetes' resourceclaim controller removes the entry of a pod that is gone,
//! replaced or done (phase `Succeeded` or `Failed`), so an allocated claim whose list is empty
//! is used by no pod that runs or may still run.
//!
//! [`IdleTracker`] is the pure state (claim UID to the time it was first seen unused) and
//! answers "idle for longer than `for`"; [`IdleClaims`] shares one between the observer and the
//! admin API. Nothing is stored: after a restart every unused claim counts as idle from the
//! moment the new process first sees it. Times are unix milliseconds given by the caller (the
//! ledger's clock). Performs no I/O and must not depend on redb, tokio, kube or the ledger.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

/// How an observer saw one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimUse {
    /// No allocation (or being deallocated): not an idle allocation.
    Unallocated,
    /// Allocated and reserved for at least one consumer.
    InUse,
    /// Allocated with `status.reservedFor` empty.
    Unused,
}

impl ClaimUse {
    /// The use of a claim with or without an allocation and with `consumers` entries in
    /// `status.reservedFor`.
    pub fn of(allocated: bool, consumers: usize) -> Self {
        match (allocated, consumers) {
            (false, _) => ClaimUse::Unallocated,
            (true, 0) => ClaimUse::Unused,
            (true, _) => ClaimUse::InUse,
        }
    }
}

/// An allocated claim unused since `since_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleClaim {
    /// The claim's UID.
    pub uid: String,
    /// Unix milliseconds since which no consumer has used it.
    pub since_ms: u64,
}

/// The unused allocated claims and since when each is unused.
#[derive(Debug, Default, Clone)]
pub struct IdleTracker {
    since: HashMap<String, u64>,
}

impl IdleTracker {
    /// Records how claim `uid` was seen at `now_ms`: an unused claim keeps the time it was first
    /// seen unused; one in use or unallocated is no longer idle.
    pub fn observe(&mut self, uid: &str, seen: ClaimUse, now_ms: u64) {
        match seen {
            ClaimUse::Unused => {
                self.since.entry(uid.to_owned()).or_insert(now_ms);
            }
            ClaimUse::InUse | ClaimUse::Unallocated => {
                self.since.remove(uid);
            }
        }
    }

    /// Forgets a deleted claim.
    pub fn forget(&mut self, uid: &str) {
        self.since.remove(uid);
    }

    /// A complete listing at `now_ms`: every claim not listed is gone, every listed one observed.
    pub fn replace<'a>(
        &mut self,
        listing: impl IntoIterator<Item = (&'a str, ClaimUse)>,
        now_ms: u64,
    ) {
        let mut listed = BTreeSet::new();
        for (uid, seen) in listing {
            self.observe(uid, seen, now_ms);
            listed.insert(uid);
        }
        self.since.retain(|uid, _| listed.contains(uid.as_str()));
    }

    /// The claims unused for longer than `for_ms` at `now_ms`, oldest first (then by UID).
    pub fn idle_for(&self, for_ms: u64, now_ms: u64) -> Vec<IdleClaim> {
        let mut idle: Vec<IdleClaim> = self
            .since
            .iter()
            .filter(|(_, since)| now_ms.saturating_sub(**since) > for_ms)
            .map(|(uid, since)| IdleClaim {
                uid: uid.clone(),
                since_ms: *since,
            })
            .collect();
        idle.sort_by(|a, b| a.since_ms.cmp(&b.since_ms).then_with(|| a.uid.cmp(&b.uid)));
        idle
    }
}

/// One [`IdleTracker`] shared between the observer that feeds it and the readers (the admin
/// API, the metrics). Share it as `Arc<IdleClaims>`.
#[derive(Debug, Default)]
pub struct IdleClaims {
    tracker: Mutex<IdleTracker>,
}

impl IdleClaims {
    fn with<T>(&self, f: impl FnOnce(&mut IdleTracker) -> T) -> T {
        // The tracker holds no invariant a panicking writer could break half-way.
        f(&mut self.tracker.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// See [`IdleTracker::observe`].
    pub fn observe(&self, uid: &str, seen: ClaimUse, now_ms: u64) {
        self.with(|t| t.observe(uid, seen, now_ms));
    }

    /// See [`IdleTracker::forget`].
    pub fn forget(&self, uid: &str) {
        self.with(|t| t.forget(uid));
    }

    /// See [`IdleTracker::replace`].
    pub fn replace<'a>(&self, listing: impl IntoIterator<Item = (&'a str, ClaimUse)>, now_ms: u64) {
        self.with(|t| t.replace(listing, now_ms));
    }

    /// See [`IdleTracker::idle_for`].
    pub fn idle_for(&self, for_ms: u64, now_ms: u64) -> Vec<IdleClaim> {
        self.with(|t| t.idle_for(for_ms, now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_800_000_000_000;
    const MINUTE: u64 = 60_000;

    fn uids(idle: &[IdleClaim]) -> Vec<&str> {
        idle.iter().map(|c| c.uid.as_str()).collect()
    }

    #[test]
    fn an_unused_claim_is_idle_only_after_for_has_passed() {
        let mut tracker = IdleTracker::default();
        tracker.observe("a", ClaimUse::Unused, T0);
        assert!(tracker.idle_for(10 * MINUTE, T0 + 10 * MINUTE).is_empty());
        let idle = tracker.idle_for(10 * MINUTE, T0 + 10 * MINUTE + 1);
        assert_eq!(
            idle,
            [IdleClaim {
                uid: "a".into(),
                since_ms: T0
            }]
        );
    }

    #[test]
    fn seeing_an_unused_claim_again_keeps_its_first_time() {
        let mut tracker = IdleTracker::default();
        tracker.observe("a", ClaimUse::Unused, T0);
        tracker.observe("a", ClaimUse::Unused, T0 + 5 * MINUTE);
        assert_eq!(tracker.idle_for(0, T0 + 6 * MINUTE)[0].since_ms, T0);
    }

    #[test]
    fn a_consumer_ends_idleness_and_losing_it_starts_it_anew() {
        let mut tracker = IdleTracker::default();
        tracker.observe("a", ClaimUse::Unused, T0);
        tracker.observe("a", ClaimUse::InUse, T0 + MINUTE);
        assert!(tracker.idle_for(0, T0 + 2 * MINUTE).is_empty());
        tracker.observe("a", ClaimUse::Unused, T0 + 3 * MINUTE);
        assert_eq!(
            tracker.idle_for(0, T0 + 4 * MINUTE)[0].since_ms,
            T0 + 3 * MINUTE
        );
    }

    #[test]
    fn deallocated_and_deleted_claims_are_not_idle() {
        let mut tracker = IdleTracker::default();
        tracker.observe("a", ClaimUse::Unused, T0);
        tracker.observe("b", ClaimUse::Unused, T0);
        tracker.observe("a", ClaimUse::Unallocated, T0 + 1);
        tracker.forget("b");
        assert!(tracker.idle_for(0, T0 + MINUTE).is_empty());
    }

    #[test]
    fn a_listing_drops_claims_it_does_not_name_and_keeps_earlier_times() {
        let mut tracker = IdleTracker::default();
        tracker.observe("a", ClaimUse::Unused, T0);
        tracker.observe("gone", ClaimUse::Unused, T0);
        tracker.replace(
            [
                ("a", ClaimUse::Unused),
                ("b", ClaimUse::Unused),
                ("c", ClaimUse::InUse),
            ],
            T0 + MINUTE,
        );
        let idle = tracker.idle_for(0, T0 + 2 * MINUTE);
        assert_eq!(uids(&idle), ["a", "b"]);
        assert_eq!((idle[0].since_ms, idle[1].since_ms), (T0, T0 + MINUTE));
    }

    #[test]
    fn idle_claims_come_oldest_first_then_by_uid() {
        let mut tracker = IdleTracker::default();
        tracker.observe("z", ClaimUse::Unused, T0 + 2);
        tracker.observe("y", ClaimUse::Unused, T0);
        tracker.observe("x", ClaimUse::Unused, T0 + 2);
        assert_eq!(uids(&tracker.idle_for(0, T0 + MINUTE)), ["y", "x", "z"]);
    }

    #[test]
    fn use_follows_allocation_and_reserved_for() {
        assert_eq!(ClaimUse::of(false, 0), ClaimUse::Unallocated);
        assert_eq!(ClaimUse::of(false, 2), ClaimUse::Unallocated);
        assert_eq!(ClaimUse::of(true, 0), ClaimUse::Unused);
        assert_eq!(ClaimUse::of(true, 1), ClaimUse::InUse);
    }
}
