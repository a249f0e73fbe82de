//! The decisions of the device-taint eviction controller, after
//! `pkg/controller/devicetainteviction`: when a pod must be evicted because a device of one of
//! its allocated claims reserved for it has a `NoExecute` taint its allocation result does not
//! tolerate ([`pod_eviction`]), and the `EvictionInProgress` condition of a `DeviceTaintRule`
//! ([`rule_condition`]).
//!
//! Pure: no I/O, no async, no kube client.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;

use crate::actors::claim_refs::{claim_name, is_for_pod, is_reserved_for_pod, pod_claim_entries};
use crate::actors::device_taints::{eviction_time, rule_selects};
use dra_types::resource_v1::{
    DeviceTaint, DeviceTaintRule, ResourceClaim, ResourceSlice, EFFECT_NONE, NO_EXECUTE,
};

/// The condition type on a `DeviceTaintRule`.
pub const EVICTION_IN_PROGRESS: &str = "EvictionInProgress";

/// `driver`, `pool`, `device`.
type DeviceKey = (String, String, String);

/// The `NoExecute` taints of the published devices: per pool only the newest generation.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PublishedTaints {
    taints: HashMap<DeviceKey, Vec<DeviceTaint>>,
    /// Devices per pool's newest generation, for the rule counts.
    devices: Vec<DeviceKey>,
}

impl PublishedTaints {
    /// The index of `slices`.
    pub fn of(slices: &[Arc<ResourceSlice>]) -> Self {
        let mut newest: HashMap<(&str, &str), i64> = HashMap::new();
        for slice in slices {
            let key = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
            let generation = newest.entry(key).or_insert(i64::MIN);
            *generation = (*generation).max(slice.spec.pool.generation);
        }
        let mut index = Self::default();
        for slice in slices {
            let (driver, pool) = (&slice.spec.driver, &slice.spec.pool.name);
            if newest.get(&(driver.as_str(), pool.as_str())) != Some(&slice.spec.pool.generation) {
                continue;
            }
            for device in &slice.spec.devices {
                let key = (driver.clone(), pool.clone(), device.name.clone());
                let evicting: Vec<DeviceTaint> = device
                    .taints
                    .iter()
                    .filter(|t| t.effect == NO_EXECUTE)
                    .cloned()
                    .collect();
                if !evicting.is_empty() {
                    index.taints.insert(key.clone(), evicting);
                }
                index.devices.push(key);
            }
        }
        index
    }

    fn of_device(&self, key: &DeviceKey) -> &[DeviceTaint] {
        self.taints.get(key).map_or(&[], Vec::as_slice)
    }
}

/// When and why a pod is to be evicted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// The earliest time of every untolerated `NoExecute` taint of the pod's devices.
    pub when: DateTime<Utc>,
    /// The rules (by UID) among the reasons.
    pub rules: BTreeSet<String>,
}

/// What the controller sees.
pub struct View<'a> {
    /// Claim lookup in the pod's namespace.
    pub claim: &'a dyn Fn(&str) -> Option<Arc<ResourceClaim>>,
    /// The devices' own taints.
    pub published: &'a PublishedTaints,
    /// The rules in force (empty where they do not count).
    pub rules: &'a [Arc<DeviceTaintRule>],
    /// The time a taint without `timeAdded` counts from.
    pub now: DateTime<Utc>,
}

/// When the pod must be evicted (`podEvictionTime`), `None` if never: only a scheduled pod
/// that is not being deleted and not done; only its claims that resolve, are its own when made
/// from a template, are allocated and reserved for it.
pub fn pod_eviction(pod: &Pod, view: &View<'_>) -> Option<Eviction> {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if !scheduled
        || pod.metadata.deletion_timestamp.is_some()
        || matches!(phase, Some("Succeeded" | "Failed"))
    {
        return None;
    }
    let mut eviction: Option<Eviction> = None;
    for entry in pod_claim_entries(pod) {
        let Ok(Some(name)) = claim_name(pod, entry) else {
            continue;
        };
        let Some(claim) = (view.claim)(&name.name) else {
            continue;
        };
        if name.check_owner && is_for_pod(pod, &claim.metadata).is_err() {
            continue;
        }
        if !is_reserved_for_pod(pod, &claim) {
            continue;
        }
        let Some(allocation) = claim.allocation() else {
            continue;
        };
        for result in &allocation.devices.results {
            let key = (
                result.driver.clone(),
                result.pool.clone(),
                result.device.clone(),
            );
            let own = view.published.of_device(&key).iter().map(|t| (t, None));
            let from_rules = view
                .rules
                .iter()
                .filter(|r| r.spec.taint.effect == NO_EXECUTE)
                .filter(|r| rule_selects(r, &key.0, &key.1, &key.2))
                .map(|r| (&r.spec.taint, r.metadata.uid.clone()));
            for (taint, rule) in own.chain(from_rules) {
                let Some(when) = eviction_time(taint, &result.tolerations, view.now) else {
                    continue;
                };
                let entry = eviction.get_or_insert_with(|| Eviction {
                    when,
                    rules: BTreeSet::new(),
                });
                entry.when = entry.when.min(when);
                entry.rules.extend(rule);
            }
        }
    }
    eviction
}

/// A `DeviceTaintRule`'s `EvictionInProgress` condition, without its times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCondition {
    /// `True` while pods wait for their eviction.
    pub status: &'static str,
    /// `PodsPendingEviction`, `Completed`, `NotStarted`, `NoEffect` or `OtherEffect`.
    pub reason: &'static str,
    /// Upstream's text.
    pub message: String,
}

/// What a rule's condition is computed from.
pub struct RuleCounts {
    /// Pods not being deleted whose eviction the rule is a reason of (for a `None` rule:
    /// would be, were its effect `NoExecute`), and in how many namespaces.
    pub pending: (usize, usize),
    /// Pods the controller evicted for the rule.
    pub evicted: u64,
    /// Published devices and allocated devices the rule selects (counted for `None` only).
    pub devices: (usize, usize),
}

fn plural(count: usize, one: &str, many: &str) -> String {
    if count == 1 {
        format!("1 {one}")
    } else {
        format!("{count} {many}")
    }
}

/// The condition upstream's `maybeUpdateRuleStatus` computes for a rule with `effect`.
pub fn rule_condition(effect: &str, counts: &RuleCounts) -> RuleCondition {
    let (pending, namespaces) = counts.pending;
    let (mut status, reason, mut message) = match effect {
        NO_EXECUTE if pending > 0 => (
            "True",
            "PodsPendingEviction",
            format!(
                "{} to be evicted in {}.",
                plural(pending, "pod needs", "pods need"),
                plural(namespaces, "namespace", "different namespaces")
            ),
        ),
        NO_EXECUTE if counts.evicted > 0 => ("False", "Completed", String::new()),
        NO_EXECUTE => ("False", "NotStarted", String::new()),
        EFFECT_NONE => (
            "False",
            "NoEffect",
            format!(
                "{} selected. {} selected. {} be evicted in {} if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.",
                plural(counts.devices.0, "published device", "published devices"),
                plural(counts.devices.1, "allocated device", "allocated devices"),
                plural(pending, "pod would", "pods would"),
                plural(namespaces, "namespace", "different namespaces"),
            ),
        ),
        _ => (
            "False",
            "OtherEffect",
            "Eviction only happens for the NoExecute effect.".to_owned(),
        ),
    };
    if effect != NO_EXECUTE {
        status = "False";
    }
    if counts.evicted > 0 {
        if !message.is_empty() {
            message.push(' ');
        }
        let evicted = usize::try_from(counts.evicted).unwrap_or(usize::MAX);
        message.push_str(&plural(evicted, "pod", "pods"));
        message.push_str(" evicted since starting the controller.");
    }
    RuleCondition {
        status,
        reason,
        message,
    }
}

/// The devices `rule` selects: published (newest generations) and allocated in `claims`.
pub fn selected_devices(
    rule: &DeviceTaintRule,
    published: &PublishedTaints,
    claims: &[Arc<ResourceClaim>],
) -> (usize, usize) {
    let selects = |(d, p, n): (&str, &str, &str)| rule_selects(rule, d, p, n);
    let in_slices = published
        .devices
        .iter()
        .filter(|(d, p, n)| selects((d, p, n)))
        .count();
    let allocated = claims
        .iter()
        .filter_map(|c| c.allocation())
        .flat_map(|a| &a.devices.results)
        .filter(|r| selects((&r.driver, &r.pool, &r.device)))
        .count();
    (in_slices, allocated)
}

#[cfg(test)]
mod tests;
