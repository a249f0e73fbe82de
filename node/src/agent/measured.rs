//! The agent's preparer: [`JournalPreparer`] with the `dra_ledger_node_` metrics, the logging
//! of refusals and, in `v1` mode, the device status report around it: a claim prepared or
//! unprepared (its journal step committed) is queued for its status write, which happens off
//! the call. Owns no state of its own but the reporter's handle.

use std::sync::OnceLock;
use std::time::Instant;

use tracing::warn;

use crate::metrics::{NodeMetrics, Outcome};
use crate::prepare::{AllocatedClaim, ClaimPreparer, ClaimRequest, JournalPreparer, PrepareError};
use crate::v1::status::StatusReporter;

/// The preparer with the agent's metrics around it.
pub(super) struct Measured {
    pub(super) inner: JournalPreparer,
    pub(super) metrics: NodeMetrics,
    /// Where prepared and unprepared v1 claims are reported; set once, before the plugin
    /// sockets serve, in `v1` mode only.
    pub(super) status: OnceLock<StatusReporter>,
}

impl Measured {
    /// Sets the prepared claims gauge from the journal.
    pub(super) fn count(&self) {
        let prepared = self.inner.entries().map(|e| e.len()).unwrap_or_default();
        self.metrics.set_prepared_claims(prepared);
    }

    /// Times `prepare` and counts its answers.
    fn measure_prepare(
        &self,
        prepare: impl FnOnce(&JournalPreparer) -> Vec<(String, Result<Vec<String>, PrepareError>)>,
    ) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        let started = Instant::now();
        let answers = prepare(&self.inner);
        self.metrics
            .observe_prepare(started.elapsed().as_secs_f64());
        for (uid, answer) in &answers {
            match answer {
                Ok(_) => self.metrics.prepared(Outcome::Success),
                Err(e) => {
                    warn!(claim.uid = %uid, error = %e, "Refused to prepare a claim");
                    self.metrics.prepared(Outcome::Error);
                }
            }
        }
        self.count();
        answers
    }
}

impl ClaimPreparer for Measured {
    fn prepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        self.measure_prepare(|inner| inner.prepare(claims))
    }

    fn prepare_allocated(
        &self,
        claims: &[AllocatedClaim],
    ) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        let answers = self.measure_prepare(|inner| inner.prepare_allocated(claims));
        if let Some(status) = self.status.get() {
            for (uid, answer) in &answers {
                let claim = claims.iter().find(|claim| claim.uid == *uid);
                if let (Ok(cdi_ids), Some(claim)) = (answer, claim) {
                    status.prepared(claim, cdi_ids);
                }
            }
        }
        answers
    }

    fn unprepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<(), PrepareError>)> {
        let answers = self.inner.unprepare(claims);
        for (uid, answer) in &answers {
            match answer {
                Ok(()) => {
                    self.metrics.unprepared(Outcome::Success);
                    let claim = claims.iter().find(|claim| claim.uid == *uid);
                    if let (Some(status), Some(claim)) = (self.status.get(), claim) {
                        status.unprepared(claim);
                    }
                }
                Err(e) => {
                    warn!(claim.uid = %uid, error = %e, "Failed to unprepare a claim");
                    self.metrics.unprepared(Outcome::Error);
                }
            }
        }
        self.count();
        answers
    }
}
