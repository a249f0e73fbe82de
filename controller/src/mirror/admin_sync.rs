//! The mirror's ledger calls for admin access: one claim's admin access brought in line with
//! what the claim shows, and the admin-access steps of a reconcile plan. The decisions are in
//! [`super::admin_access`]; this module only calls the ledger, logs and counts.

use std::time::Instant;

use dra_allocator::ledger::{AdminAccessChange, AdminAccessRequest};
use dra_metrics::{AllocationMode, AllocationOutcome};
use futures::StreamExt;
use tracing::info;

use super::admin_access::{admin_steps_for, AdminSteps};
use super::Mirror;
use crate::driver::{DriftReport, Result};

/// How many admin-access writes of a reconcile run at once (the ledger batches them).
const PARALLEL_WRITES: usize = 16;

impl Mirror {
    /// Applies the steps from the ledger's admin access of claim `uid` to `shown`.
    pub(super) async fn converge_admin(
        &self,
        uid: &str,
        shown: Option<&AdminAccessRequest>,
    ) -> Result<()> {
        let key = uid.to_owned();
        let held = self.keeper.call(move |l| l.admin_access(&key)).await?;
        self.apply_admin(uid, admin_steps_for(held.as_ref(), shown))
            .await
    }

    async fn apply_admin(&self, uid: &str, steps: AdminSteps) -> Result<()> {
        if let Some(request) = steps.record {
            self.record_admin(request).await?;
        } else if steps.release {
            let key = uid.to_owned();
            if let Some(released) = self
                .keeper
                .call(move |l| l.release_admin_access(&key))
                .await?
            {
                info!(claim.uid = %uid, claim.name = %format!("{}/{}", released.claim.namespace, released.claim.name), node = %released.node, "Released the admin access the cluster no longer shows");
            }
        }
        Ok(())
    }

    async fn record_admin(&self, request: AdminAccessRequest) -> Result<()> {
        let (uid, node) = (request.claim.uid.clone(), request.node.clone());
        let name = format!("{}/{}", request.claim.namespace, request.claim.name);
        let started = Instant::now();
        let change = self
            .keeper
            .call(move |l| l.record_admin_access(request))
            .await?;
        if change != AdminAccessChange::Unchanged {
            self.keeper.observer().allocation(
                AllocationMode::Mirrored,
                AllocationOutcome::AdminAccess,
                1,
                started.elapsed(),
            );
            info!(claim.uid = %uid, claim.name = %name, node = %node, "Mirrored admin access from the cluster");
        }
        Ok(())
    }

    /// Runs the admin-access steps of a reconcile plan and counts their drift in `report`.
    pub(super) async fn run_admin_plan(
        &self,
        steps: std::collections::BTreeMap<String, AdminSteps>,
        report: &mut DriftReport,
    ) {
        let outcomes: Vec<_> = futures::stream::iter(steps)
            .map(|(uid, steps)| async move {
                let drift = steps.drift;
                let result = self.apply_admin(&uid, steps).await;
                (uid, drift, result)
            })
            .buffer_unordered(PARALLEL_WRITES)
            .collect()
            .await;
        for (uid, drift, result) in outcomes {
            match result {
                Ok(()) => {
                    if let Some(kind) = drift {
                        report.add(kind);
                    }
                }
                Err(error) => report.errors.push(format!("admin access {uid}: {error}")),
            }
        }
    }
}
