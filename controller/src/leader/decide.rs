//! The pure part of leader election: given the Lease as last read, what a candidate does next.
//!
//! Expiry is judged by the candidate's own monotonic clock, never by the timestamps in the Lease
//! (another machine's wall clock): a holder's lease has expired once its record (holder, renew
//! time, transitions) has not changed for `lease_duration` since this candidate first saw it.
//! No I/O; the elector does the reads and writes.

use std::time::{Duration, Instant};

/// The parts of a Lease that election looks at.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LeaseRecord {
    /// `spec.holderIdentity`; `None` or empty when released.
    pub holder: Option<String>,
    /// `spec.renewTime` as written (compared for change only).
    pub renew_time: Option<String>,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
}

impl LeaseRecord {
    /// The holder, if the lease is held.
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// When this candidate first saw the current record of the lease.
#[derive(Clone, Debug)]
pub struct Observed {
    record: LeaseRecord,
    since: Instant,
}

/// What to do with the lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// There is no lease: create it, held by us.
    Create,
    /// Take the lease: it is ours already (a restart of the same identity), released, or expired.
    /// `transitions` is the value to write; `previous` the holder it is taken from.
    Acquire {
        /// `spec.leaseTransitions` to write.
        transitions: i32,
        /// The identity that held it, if another one did.
        previous: Option<String>,
    },
    /// Another candidate holds it; look again later.
    Wait {
        /// The holder.
        holder: String,
        /// How long until it expires if its holder does not renew it.
        expires_in: Duration,
    },
}

/// Decides, and updates `observed` with the record read at `now`.
pub fn decide(
    lease: Option<&LeaseRecord>,
    identity: &str,
    lease_duration: Duration,
    observed: &mut Option<Observed>,
    now: Instant,
) -> Decision {
    let Some(record) = lease else {
        *observed = None;
        return Decision::Create;
    };
    let since = match observed {
        Some(seen) if seen.record == *record => seen.since,
        _ => {
            *observed = Some(Observed {
                record: record.clone(),
                since: now,
            });
            now
        }
    };
    match record.holder() {
        Some(holder) if holder == identity => Decision::Acquire {
            transitions: record.transitions,
            previous: None,
        },
        None => Decision::Acquire {
            transitions: record.transitions.saturating_add(1),
            previous: None,
        },
        Some(holder) => {
            let held_for = now.saturating_duration_since(since);
            if held_for >= lease_duration {
                Decision::Acquire {
                    transitions: record.transitions.saturating_add(1),
                    previous: Some(holder.to_owned()),
                }
            } else {
                Decision::Wait {
                    holder: holder.to_owned(),
                    expires_in: lease_duration.saturating_sub(held_for),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn held(holder: &str, renew: &str) -> LeaseRecord {
        LeaseRecord {
            holder: Some(holder.to_owned()),
            renew_time: Some(renew.to_owned()),
            transitions: 3,
        }
    }

    #[test]
    fn missing_lease_is_created() {
        let mut observed = None;
        let decision = decide(None, "a", LEASE, &mut observed, Instant::now());
        assert_eq!(decision, Decision::Create);
    }

    #[test]
    fn own_lease_is_taken_at_once_without_a_transition() {
        let mut observed = None;
        let decision = decide(
            Some(&held("a", "t1")),
            "a",
            LEASE,
            &mut observed,
            Instant::now(),
        );
        assert_eq!(
            decision,
            Decision::Acquire {
                transitions: 3,
                previous: None
            }
        );
    }

    #[test]
    fn released_lease_is_taken_at_once_with_a_transition() {
        let released = LeaseRecord {
            holder: Some(String::new()),
            ..held("", "t1")
        };
        let mut observed = None;
        let decision = decide(Some(&released), "b", LEASE, &mut observed, Instant::now());
        assert_eq!(
            decision,
            Decision::Acquire {
                transitions: 4,
                previous: None
            }
        );
    }

    #[test]
    fn held_lease_expires_only_after_a_full_duration_unchanged() {
        let start = Instant::now();
        let mut observed = None;
        let record = held("a", "t1");
        let first = decide(Some(&record), "b", LEASE, &mut observed, start);
        assert_eq!(
            first,
            Decision::Wait {
                holder: "a".into(),
                expires_in: LEASE
            }
        );
        let later = decide(
            Some(&record),
            "b",
            LEASE,
            &mut observed,
            start + Duration::from_secs(10),
        );
        assert_eq!(
            later,
            Decision::Wait {
                holder: "a".into(),
                expires_in: Duration::from_secs(5)
            }
        );
        let expired = decide(Some(&record), "b", LEASE, &mut observed, start + LEASE);
        assert_eq!(
            expired,
            Decision::Acquire {
                transitions: 4,
                previous: Some("a".into())
            }
        );
    }

    #[test]
    fn a_renewal_restarts_the_expiry_clock() {
        let start = Instant::now();
        let mut observed = None;
        decide(Some(&held("a", "t1")), "b", LEASE, &mut observed, start);
        let renewed_at = start + Duration::from_secs(14);
        let decision = decide(
            Some(&held("a", "t2")),
            "b",
            LEASE,
            &mut observed,
            renewed_at,
        );
        assert!(matches!(decision, Decision::Wait { expires_in, .. } if expires_in == LEASE));
        let decision = decide(
            Some(&held("a", "t2")),
            "b",
            LEASE,
            &mut observed,
            start + Duration::from_secs(20),
        );
        assert!(matches!(decision, Decision::Wait { .. }), "{decision:?}");
    }
}
