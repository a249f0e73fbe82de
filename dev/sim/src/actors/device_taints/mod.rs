//! Device taints as the 1.35+ control plane reads them (KEP 5055): the taints in force on a
//! device (its own, from its `ResourceSlice`, and those of every `DeviceTaintRule` whose
//! selector matches it), whether a request's tolerations let the scheduler allocate it, and
//! when a pod using it must be evicted.
//!
//! After `k8s.io/dynamic-resource-allocation`: `resourceclaim.ToleratesTaint` (the matching of
//! one toleration and one taint), the structured allocator's `taintPreventsAllocation` (only
//! `NoSchedule` and `NoExecute` keep a device from a request, `None` and unknown effects do
//! not) and the device-taint eviction controller's `claimEvictionTime` and
//! `ruleMatchesDevice` (`pkg/controller/devicetainteviction`).
//!
//! Pure: no I/O, no async, no kube client. The scheduler (`scheduler_v1`) and the eviction
//! controller (`taint_eviction`) use it; it must depend on neither.

pub mod rules;

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use dra_types::resource_v1::{DeviceTaint, DeviceTaintRule, DeviceToleration, NO_EXECUTE};

/// What a release's feature gates switch on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaintGates {
    /// `DRADeviceTaints`: device taints and request tolerations count.
    pub taints: bool,
    /// `DeviceTaintRule`s count too (the rules gate, served in some API version).
    pub rules: bool,
}

pub use dra_types::resource_v1::{prevents_allocation, rule_selects, tolerates};

/// The `DeviceTaintRule`s in force, for looking up the taints of a device.
#[derive(Debug, Clone, Copy)]
pub struct TaintView<'a> {
    /// The rules; empty where the release does not apply them.
    pub rules: &'a [Arc<DeviceTaintRule>],
}

impl<'a> TaintView<'a> {
    /// The taints in force on device `driver/pool/device` whose slice lists `own`: its own,
    /// then those of the rules selecting it.
    pub fn taints_of<'d>(
        &self,
        (driver, pool, device): (&'d str, &'d str, &'d str),
        own: &'d [DeviceTaint],
    ) -> impl Iterator<Item = &'d DeviceTaint> + 'd
    where
        'a: 'd,
    {
        let rules = self.rules;
        own.iter().chain(
            rules
                .iter()
                .filter(move |rule| rule_selects(rule, driver, pool, device))
                .map(|rule| &rule.spec.taint),
        )
    }
}

/// When a pod using a device with `taint` through an allocation result with `tolerations` is
/// evicted (`claimEvictionTime`, per taint): never (`None`) unless the effect is `NoExecute`;
/// never when a `NoExecute` toleration tolerates it without `tolerationSeconds`; else at the
/// taint's `timeAdded` plus the smallest `tolerationSeconds` of the `NoExecute` tolerations
/// that tolerate it (negative counts as 0), or at `timeAdded` when none does. Upstream counts
/// only tolerations whose effect is `NoExecute` here, not those with an empty effect. A taint
/// without `timeAdded` (the server stamps one) counts from `unknown_added`.
pub fn eviction_time(
    taint: &DeviceTaint,
    tolerations: &[DeviceToleration],
    unknown_added: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if taint.effect != NO_EXECUTE {
        return None;
    }
    let added = taint.time_added.as_ref().map_or(unknown_added, |t| t.0);
    let mut seconds: Option<i64> = None;
    for toleration in tolerations {
        if toleration.effect.as_deref() != Some(NO_EXECUTE) || !tolerates(toleration, taint) {
            continue;
        }
        let this = toleration.toleration_seconds?.max(0);
        seconds = Some(seconds.map_or(this, |s| s.min(this)));
    }
    Some(added + Duration::seconds(seconds.unwrap_or(0)))
}

#[cfg(test)]
mod tests;
