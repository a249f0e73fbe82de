//! The agent's preparer: [`JournalPreparer`] with the `dra_ledger_node_` metrics and the logging
//! of refusals around it. Owns no state of its own.

use std::time::Instant;

use tracing::warn;

use crate::metrics::{NodeMetrics, Outcome};
use crate::prepare::{AllocatedClaim, ClaimPreparer, ClaimRequest, JournalPreparer, PrepareError};

/// The preparer with the agent's metrics around it.
pub(super) struct Measured {
    pub(super) inner: JournalPreparer,
    pub(super) metrics: NodeMetrics,
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
        self.measure_prepare(|inner| inner.prepare_allocated(claims))
    }

    fn unprepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<(), PrepareError>)> {
        let answers = self.inner.unprepare(claims);
        for (uid, answer) in &answers {
            match answer {
                Ok(()) => self.metrics.unprepared(Outcome::Success),
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
