//! The pure part of mirroring admin access: a claim's results of our driver with
//! `adminAccess: true` turned into the ledger's [`AdminAccessRequest`], and what the ledger must
//! do so that it holds what the claim shows ([`admin_steps_for`]), with the drift each difference
//! counts as: `missing_in_ledger` (recorded), `orphan_in_ledger` (released), `device_mismatch`
//! (replaced), the kinds the allocations count.
//!
//! An admin-access claim takes no device from anyone: the ledger keeps it apart from the
//! allocations and records it only for devices it holds, so devices no slice publishes are left
//! out here (and counted by the reconcile as `unpublished_device`). No I/O.

use dra_allocator::ledger::{same_placement, AdminAccess, AdminAccessRequest, ClaimRef};
use dra_types::resource_v1::DeviceRequestAllocationResult;

use super::mapping::{placement, ClaimMirror, SliceInventory};
use crate::driver::DriftKind;

/// The admin access of `claim` from its admin-access results of our driver (`admin`), in a
/// [`ClaimMirror`] with no allocation yet; devices in the pools of several nodes are a problem.
pub(super) fn admin_mirror(
    admin: &[&DeviceRequestAllocationResult],
    inventory: &SliceInventory,
    driver: &str,
    claim: &ClaimRef,
) -> ClaimMirror {
    let mut mirror = ClaimMirror::default();
    if admin.is_empty() {
        return mirror;
    }
    let full_name = format!("{}/{}", claim.namespace, claim.name);
    match placement(admin, inventory, driver, &full_name) {
        Ok((node, devices)) => {
            let (published, unpublished): (Vec<String>, Vec<String>) = devices
                .into_iter()
                .partition(|device| inventory.publishes(&node, device));
            mirror.admin_unpublished = unpublished
                .iter()
                .map(|device| format!("{node}/{device}"))
                .collect();
            mirror.admin_access = (!published.is_empty()).then(|| AdminAccessRequest {
                claim: claim.clone(),
                node,
                devices: published,
            });
        }
        Err(problem) => mirror.problem = Some(format!("admin access: {problem}")),
    }
    mirror
}

/// Whether the ledger's admin access is the one the claim shows: same claim names, node and set
/// of devices.
pub fn same_admin_access(held: &AdminAccess, shown: &AdminAccessRequest) -> bool {
    held.claim == shown.claim
        && same_placement(&held.node, &held.devices, &shown.node, &shown.devices)
}

/// What the ledger does for one claim's admin access so that it holds what the claim shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdminSteps {
    /// Record (or replace with) this admin access.
    pub record: Option<AdminAccessRequest>,
    /// Release the claim's admin access.
    pub release: bool,
    /// What the difference counts as when a reconcile finds it.
    pub drift: Option<DriftKind>,
}

/// The steps from `held` (the ledger's admin access of the claim) to `shown` (what the claim
/// shows): nothing when they agree, a record when the claim has one (it replaces a different
/// one), a release when only the ledger has one.
pub fn admin_steps_for(
    held: Option<&AdminAccess>,
    shown: Option<&AdminAccessRequest>,
) -> AdminSteps {
    match (held, shown) {
        (None, None) => AdminSteps::default(),
        (Some(held), Some(shown)) if same_admin_access(held, shown) => AdminSteps::default(),
        (held, Some(shown)) => AdminSteps {
            record: Some(shown.clone()),
            release: false,
            drift: Some(if held.is_some() {
                DriftKind::DeviceMismatch
            } else {
                DriftKind::MissingInLedger
            }),
        },
        (Some(_), None) => AdminSteps {
            record: None,
            release: true,
            drift: Some(DriftKind::OrphanInLedger),
        },
    }
}

#[cfg(test)]
mod tests;
