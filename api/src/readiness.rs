//! The readiness flags behind `GET /readyz`: the process is ready once the ledger is open, the
//! controller's caches are synced and the initial reconcile is done. A standby replica (leader
//! election, not holding the lease) is ready once its ledger is open: it is healthy and ready to
//! take over, and a `StatefulSet` rollout must not wait for it to become the leader. Set by the
//! process that starts those parts; read by the router. Depends on nothing else.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Debug, Default)]
struct Flags {
    ledger_open: AtomicBool,
    caches_synced: AtomicBool,
    reconciled: AtomicBool,
    standby: AtomicBool,
}

/// Shared readiness flags; clones share the same flags. Each flag only ever goes from unset to set.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    flags: Arc<Flags>,
}

impl Readiness {
    /// All flags unset.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the ledger as open.
    pub fn set_ledger_open(&self) {
        self.flags.ledger_open.store(true, Ordering::Release);
    }

    /// Marks the controller's caches as synced.
    pub fn set_caches_synced(&self) {
        self.flags.caches_synced.store(true, Ordering::Release);
    }

    /// Marks the initial reconcile as done.
    pub fn set_reconciled(&self) {
        self.flags.reconciled.store(true, Ordering::Release);
    }

    /// Marks this process as a standby (`true`) or as the active leader (`false`, the default
    /// without leader election).
    pub fn set_standby(&self, standby: bool) {
        self.flags.standby.store(standby, Ordering::Release);
    }

    /// Whether this process is a standby replica.
    pub fn is_standby(&self) -> bool {
        self.flags.standby.load(Ordering::Acquire)
    }

    /// What is still missing, in start order; empty when ready. A standby needs only its
    /// ledger open.
    pub fn waiting_for(&self) -> Vec<&'static str> {
        let flags = &self.flags;
        let standby = self.is_standby();
        [
            (&flags.ledger_open, "ledger open"),
            (&flags.caches_synced, "caches synced"),
            (&flags.reconciled, "initial reconcile"),
        ]
        .into_iter()
        .take(if standby { 1 } else { 3 })
        .filter(|(flag, _)| !flag.load(Ordering::Acquire))
        .map(|(_, what)| what)
        .collect()
    }

    /// Whether every flag is set.
    pub fn is_ready(&self) -> bool {
        self.waiting_for().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_after_all_three_flags() {
        let readiness = Readiness::new();
        assert_eq!(
            readiness.waiting_for(),
            ["ledger open", "caches synced", "initial reconcile"]
        );
        let shared = readiness.clone();
        shared.set_ledger_open();
        shared.set_reconciled();
        assert_eq!(readiness.waiting_for(), ["caches synced"]);
        assert!(!readiness.is_ready());
        shared.set_caches_synced();
        assert!(readiness.is_ready());
    }

    #[test]
    fn standby_is_ready_with_its_ledger_open() {
        let readiness = Readiness::new();
        readiness.set_standby(true);
        assert_eq!(readiness.waiting_for(), ["ledger open"]);
        readiness.set_ledger_open();
        assert!(readiness.is_ready() && readiness.is_standby());
        readiness.set_standby(false);
        assert_eq!(
            readiness.waiting_for(),
            ["caches synced", "initial reconcile"]
        );
    }
}
