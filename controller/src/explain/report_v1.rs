//! The text of `dra-ledger explain pod` on `resource.k8s.io/v1` clusters, where the
//! kube-scheduler allocates: the pod's line, one line per claim (allocated on which node, which
//! devices, reserved for whom), the scheduler-made extended-resource claim, the health the
//! kubelet reports for a running pod's devices, the newest events, and for a pod that waits why:
//! the devices of our driver the claim's classes could use that carry a taint the request does
//! not tolerate (unhealthy, cordoned, or any other `NoSchedule`/`NoExecute` taint, from the
//! slice or a `DeviceTaintRule`), then the scheduler's last message. Pure: works on [`V1Facts`]
//! gathered elsewhere; the pod line, events and `why:` are those of the `v1alpha2` report.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use dra_node::v1::taints::unhealthy_key;
use dra_types::resource_v1::{
    rule_selects, tolerates, DeviceClass, DeviceTaint, DeviceTaintRule, DeviceToleration,
    ResourceClaim, ResourceSlice, NO_EXECUTE, NO_SCHEDULE,
};
use k8s_openapi::api::core::v1::Pod;

use super::report::{
    claim_label, event_lines, missing_claim_line, newest, pod_line, scheduler_says, usable_claim,
    why_line, EventLine, PodClaimFacts,
};
use crate::mirror::cordon::cordon_key;
use crate::mirror::explain::our_classes;

/// How many tainted devices a reason names before it counts the rest.
const DEVICES_NAMED: usize = 6;

/// One device health entry of `status.containerStatuses[].allocatedResourcesStatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHealthLine {
    /// The container.
    pub container: String,
    /// The entry's name (`claim:<name>` or `claim:<name>/<request>`).
    pub resource: String,
    /// The device (`resourceID`).
    pub device: String,
    /// `Healthy`, `Unhealthy` or `Unknown`.
    pub health: String,
    /// The plugin's message, when it sent one.
    pub message: Option<String>,
}

impl DeviceHealthLine {
    /// The entries of the pod's `status.containerStatuses[].allocatedResourcesStatus` (the
    /// pod as the API server serves it, fields newer than the typed model included).
    pub fn of_pod(pod: &serde_json::Value) -> Vec<DeviceHealthLine> {
        let mut out = Vec::new();
        let statuses = pod["status"]["containerStatuses"].as_array();
        for status in statuses.into_iter().flatten() {
            let container = status["name"].as_str().unwrap_or_default();
            let entries = status["allocatedResourcesStatus"].as_array();
            for entry in entries.into_iter().flatten() {
                let resource = entry["name"].as_str().unwrap_or_default();
                for device in entry["resources"].as_array().into_iter().flatten() {
                    out.push(DeviceHealthLine {
                        container: container.to_owned(),
                        resource: resource.to_owned(),
                        device: device["resourceID"].as_str().unwrap_or_default().to_owned(),
                        health: device["health"].as_str().unwrap_or("Unknown").to_owned(),
                        message: device["message"].as_str().map(str::to_owned),
                    });
                }
            }
        }
        out
    }
}

/// What the cluster says about the pod on `resource.k8s.io/v1`.
#[derive(Debug, Clone)]
pub struct V1Facts {
    /// The pod.
    pub pod: Pod,
    /// Its claims, in the order of `spec.resourceClaims`, then the extended-resource claim of
    /// `status.extendedResourceClaimStatus` (its pod claim named `extended resources`).
    pub claims: Vec<PodClaimFacts<ResourceClaim>>,
    /// The kubelet's device health of the running pod.
    pub health: Vec<DeviceHealthLine>,
    /// Our driver's ResourceSlices.
    pub slices: Vec<ResourceSlice>,
    /// The DeviceTaintRules.
    pub rules: Vec<DeviceTaintRule>,
    /// The DeviceClasses.
    pub classes: Vec<DeviceClass>,
    /// Events about the pod and its claims, in any order.
    pub events: Vec<EventLine>,
}

/// The node of pool `pool` of our slices (the pool's name where no slice names a node).
fn node_of(slices: &[ResourceSlice], pool: &str) -> String {
    slices
        .iter()
        .find(|s| s.spec.pool.name == pool)
        .and_then(|s| s.spec.node_name.clone())
        .unwrap_or_else(|| pool.to_owned())
}

/// The claim's line: allocated on which node with which devices and reserved for whom, or not.
fn claim_line(entry: &PodClaimFacts<ResourceClaim>, facts: &V1Facts, driver: &str) -> String {
    let Some(claim) = &entry.claim else {
        return missing_claim_line(entry);
    };
    let mut line = claim_label(entry);
    if let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
        let ours: Vec<_> = allocation
            .devices
            .results
            .iter()
            .filter(|r| r.driver == driver)
            .collect();
        match ours.first() {
            Some(first) => {
                let devices: Vec<&str> = ours.iter().map(|r| r.device.as_str()).collect();
                let node = node_of(&facts.slices, &first.pool);
                let _ = write!(line, ": allocated on {node}: {}", devices.join(", "));
            }
            None => line.push_str(": allocated by another driver"),
        }
        let reserved: Vec<&str> = claim
            .status
            .iter()
            .flat_map(|s| &s.reserved_for)
            .map(|r| r.name.as_str())
            .collect();
        if reserved.is_empty() {
            line.push_str("; reserved for nobody");
        } else {
            let _ = write!(line, "; reserved for {}", reserved.join(", "));
        }
    } else {
        let classes: BTreeSet<&str> = alternatives(claim).map(|(class, _)| class).collect();
        let classes: Vec<&str> = classes.into_iter().collect();
        let _ = write!(line, ": not allocated (class {})", classes.join(", "));
    }
    if claim.metadata.deletion_timestamp.is_some() {
        line.push_str("; being deleted");
    }
    line
}

/// Each way a request of `claim` can be satisfied: its class and its tolerations.
fn alternatives(claim: &ResourceClaim) -> impl Iterator<Item = (&str, &[DeviceToleration])> {
    claim.spec.devices.requests.iter().flat_map(|request| {
        let exact = request
            .exactly
            .iter()
            .map(|e| (e.device_class_name.as_str(), e.tolerations.as_slice()));
        let subs = request
            .first_available
            .iter()
            .map(|s| (s.device_class_name.as_str(), s.tolerations.as_slice()));
        exact.chain(subs)
    })
}

/// What a taint says about a device: `is unhealthy (REASON since TIME)`, `is cordoned` or
/// `is tainted`, then the taint (`key[=value]:effect`, with the rule that puts it).
fn taint_text(taint: &DeviceTaint, rule: Option<&str>, driver: &str) -> String {
    let since = taint
        .time_added
        .as_ref()
        .map(|t| format!(" since {}", t.0.to_rfc3339()))
        .unwrap_or_default();
    let (state, value) = if taint.key == unhealthy_key(driver) {
        let reason = taint.value.as_deref().filter(|v| !v.is_empty());
        (
            format!("is unhealthy ({}{since})", reason.unwrap_or("Unhealthy")),
            String::new(),
        )
    } else if taint.key == cordon_key(driver) {
        ("is cordoned".to_owned(), String::new())
    } else {
        let value = taint.value.as_deref().map(|v| format!("={v}"));
        ("is tainted".to_owned(), value.unwrap_or_default())
    };
    let by = rule
        .map(|r| format!(" (DeviceTaintRule {r})"))
        .unwrap_or_default();
    format!("{state}: taint {}{value}:{}{by}", taint.key, taint.effect)
}

/// The devices of our driver a claim's request of one of our classes could use that carry a
/// `NoSchedule`/`NoExecute` taint its tolerations do not tolerate, one text each.
pub fn untolerated(claim: &ResourceClaim, facts: &V1Facts, driver: &str) -> Vec<String> {
    let ours = our_classes(&facts.classes, driver);
    let wanted: Vec<&[DeviceToleration]> = alternatives(claim)
        .filter(|(class, _)| ours.contains(*class))
        .map(|(_, tolerations)| tolerations)
        .collect();
    let mut out = Vec::new();
    if wanted.is_empty() {
        return out;
    }
    for slice in facts.slices.iter().filter(|s| s.spec.driver == driver) {
        let node = slice
            .spec
            .node_name
            .as_deref()
            .unwrap_or(&slice.spec.pool.name);
        for device in &slice.spec.devices {
            let from_rules = facts
                .rules
                .iter()
                .filter(|rule| rule_selects(rule, driver, &slice.spec.pool.name, &device.name));
            let taints = device
                .taints
                .iter()
                .map(|t| (t, None))
                .chain(from_rules.map(|r| (&r.spec.taint, r.metadata.name.as_deref())));
            for (taint, rule) in taints {
                let blocks = matches!(taint.effect.as_str(), NO_SCHEDULE | NO_EXECUTE)
                    && wanted
                        .iter()
                        .any(|tolerations| !tolerations.iter().any(|t| tolerates(t, taint)));
                if blocks {
                    let text = taint_text(taint, rule, driver);
                    out.push(format!("{} on {node} {text}", device.name));
                }
            }
        }
    }
    out
}

/// Why the claim of `entry` keeps the pod from being scheduled, if it does.
fn why_claim_blocks(
    entry: &PodClaimFacts<ResourceClaim>,
    facts: &V1Facts,
    driver: &str,
) -> Option<String> {
    let namespace = facts.pod.metadata.namespace.as_deref().unwrap_or_default();
    let (claim, name) = match usable_claim(entry, namespace) {
        Ok(usable) => usable,
        Err(why) => return Some(why),
    };
    if claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
    {
        return None;
    }
    let tainted = untolerated(claim, facts, driver);
    let ledger = newest(&facts.events, |e| {
        e.object == name && e.kind == "ResourceClaim" && e.type_ == "Warning"
    });
    if tainted.is_empty() && ledger.is_none() {
        return None;
    }
    let pod_name = facts.pod.metadata.name.as_deref().unwrap_or_default();
    let mut why = format!("claim {name} is not allocated");
    if !tainted.is_empty() {
        let named: Vec<&str> = tainted
            .iter()
            .take(DEVICES_NAMED)
            .map(String::as_str)
            .collect();
        let _ = write!(
            why,
            "; devices its requests do not tolerate: {}",
            named.join("; ")
        );
        if tainted.len() > DEVICES_NAMED {
            let _ = write!(why, "; and {} more", tainted.len() - DEVICES_NAMED);
        }
    }
    if let Some(event) = ledger {
        let _ = write!(why, "; {} says: {}", event.reason, event.note);
    }
    let _ = write!(why, "; {}", scheduler_says(&facts.events, pod_name));
    Some(why)
}

/// The report on the pod, one line per fact, ending with the reason when it waits.
pub fn report_v1(facts: &V1Facts, driver: &str) -> String {
    let pod = &facts.pod;
    let mut out = String::new();
    let (node, phase) = pod_line(&mut out, pod);
    if facts.claims.is_empty() {
        out.push_str("  no resource claims\n");
    }
    for entry in &facts.claims {
        let _ = writeln!(out, "  {}", claim_line(entry, facts, driver));
    }
    for health in &facts.health {
        let message = health
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  device {} ({}, container {}): {}{message}",
            health.device, health.resource, health.container, health.health
        );
    }
    event_lines(&mut out, &facts.events, pod);
    why_line(&mut out, node.as_deref(), &phase, || {
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        facts
            .claims
            .iter()
            .find_map(|entry| why_claim_blocks(entry, facts, driver))
            .unwrap_or_else(|| scheduler_says(&facts.events, pod_name))
    });
    let unhealthy: Vec<&str> = facts
        .health
        .iter()
        .filter(|h| h.health == "Unhealthy")
        .map(|h| h.device.as_str())
        .collect();
    if node.is_some() && !unhealthy.is_empty() {
        let _ = writeln!(
            out,
            "health: the kubelet reports device {} unhealthy; the pod keeps it until it is \
             deleted (or evicted by a NoExecute taint)",
            unhealthy.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests;
