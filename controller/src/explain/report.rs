//! The text of `dra-ledger explain pod`: the pod's phase and node, one line per claim (allocated?
//! where, which devices, shareable, reserved for whom), the drivers' last node check from the
//! PodSchedulingContext, the newest events, and for a pod that waits one sentence saying why and
//! what to do. Pure: works on [`Facts`] gathered elsewhere.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim};

use crate::driver::handle::{claim_allocation, ClaimAllocationState};

/// How many of the newest events about the pod are shown.
const EVENTS_SHOWN: usize = 4;
/// How many characters of an event's note are shown.
const NOTE_SHOWN: usize = 240;

/// One entry of `pod.spec.resourceClaims` with the claim behind it (a `v1alpha2` claim, or on
/// `resource.k8s.io/v1` a [`dra_types::resource_v1::ResourceClaim`]).
#[derive(Debug, Clone)]
pub struct PodClaimFacts<C = ResourceClaim> {
    /// The pod's name for the claim.
    pub pod_claim: String,
    /// The ResourceClaim's name; `None` when a template's claim was not created yet.
    pub claim_name: Option<String>,
    /// Whether the entry names a ResourceClaimTemplate.
    pub from_template: bool,
    /// The claim, when it exists.
    pub claim: Option<C>,
}

/// One event about the pod or one of its claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine {
    /// When it was last seen.
    pub time: Option<DateTime<Utc>>,
    /// `Pod` or `ResourceClaim` (the kind of the object it is about).
    pub kind: String,
    /// The object's name.
    pub object: String,
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The reason (`FailedScheduling`, `NoSuitableNode`, ...).
    pub reason: String,
    /// The message.
    pub note: String,
    /// The reporting controller.
    pub from: String,
}

impl EventLine {
    /// The line of `event` when it is about one of `subjects` (pod and claim names).
    pub fn of(event: &Event, subjects: &[String]) -> Option<EventLine> {
        let regarding = event.regarding.as_ref()?;
        let object = regarding.name.clone()?;
        if !subjects.contains(&object) {
            return None;
        }
        let time = event
            .series
            .as_ref()
            .map(|s| s.last_observed_time.0)
            .or_else(|| event.event_time.as_ref().map(|t| t.0))
            .or_else(|| event.deprecated_last_timestamp.as_ref().map(|t| t.0));
        Some(EventLine {
            time,
            kind: regarding.kind.clone().unwrap_or_default(),
            object,
            type_: event.type_.clone().unwrap_or_default(),
            reason: event.reason.clone().unwrap_or_default(),
            note: event.note.clone().unwrap_or_default(),
            from: event.reporting_controller.clone().unwrap_or_default(),
        })
    }
}

/// What the cluster says about the pod.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The pod.
    pub pod: Pod,
    /// Its claims, in the order of `spec.resourceClaims`.
    pub claims: Vec<PodClaimFacts>,
    /// Its PodSchedulingContext, if one exists.
    pub context: Option<PodSchedulingContext>,
    /// Events about the pod and its claims, in any order.
    pub events: Vec<EventLine>,
}

fn reserved_names(claim: &ResourceClaim) -> Vec<String> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .map(|r| r.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default()
}

fn shareable(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.shareable)
        == Some(true)
}

fn allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

/// The claim's name in the report: `claim NAME`, with the pod's name for it where that differs.
pub(super) fn claim_label<C>(entry: &PodClaimFacts<C>) -> String {
    match &entry.claim_name {
        Some(name) if *name == entry.pod_claim => format!("claim {name}"),
        Some(name) => format!("claim {name} (pod claim {})", entry.pod_claim),
        None => format!("pod claim {}", entry.pod_claim),
    }
}

/// The line of a claim that does not exist (yet).
pub(super) fn missing_claim_line<C>(entry: &PodClaimFacts<C>) -> String {
    let label = claim_label(entry);
    match &entry.claim_name {
        Some(_) => format!("{label}: does not exist"),
        None => format!("{label}: its claim is not created yet"),
    }
}

/// The claim's line: allocated where and with which devices, shareable, reserved for whom.
fn claim_line(entry: &PodClaimFacts, driver_name: &str) -> String {
    let Some(claim) = &entry.claim else {
        return missing_claim_line(entry);
    };
    let mut line = claim_label(entry);
    match claim_allocation(claim, driver_name) {
        Ok(ClaimAllocationState::Ours(data)) => {
            let _ = write!(
                line,
                ": allocated on {}: {}",
                data.node,
                data.devices.join(", ")
            );
        }
        Ok(ClaimAllocationState::OtherDriver) => line.push_str(": allocated by another driver"),
        Ok(ClaimAllocationState::Unallocated) => {
            let mode = claim
                .spec
                .allocation_mode
                .as_deref()
                .unwrap_or("WaitForFirstConsumer");
            let _ = write!(
                line,
                ": not allocated ({mode}, class {})",
                claim.spec.resource_class_name
            );
        }
        Err(error) => {
            let _ = write!(line, ": unreadable allocation ({error})");
        }
    }
    if allocated(claim) {
        line.push_str(if shareable(claim) {
            "; shareable"
        } else {
            "; not shareable"
        });
        let reserved = reserved_names(claim);
        if reserved.is_empty() {
            line.push_str("; reserved for nobody");
        } else {
            let _ = write!(line, "; reserved for {}", reserved.join(", "));
        }
    }
    if claim.status.as_ref().and_then(|s| s.deallocation_requested) == Some(true) {
        line.push_str("; deallocation requested");
    }
    line
}

/// The drivers' last node check: per pending claim, the unsuitable nodes among the potential ones.
fn node_check(facts: &Facts) -> Option<String> {
    let context = facts.context.as_ref()?;
    let potential = context.spec.potential_nodes.clone().unwrap_or_default();
    let entries = context.status.as_ref()?.resource_claims.as_ref()?;
    let mut parts = Vec::new();
    for entry in entries {
        let unsuitable = entry.unsuitable_nodes.clone().unwrap_or_default();
        let suitable: Vec<&String> = potential
            .iter()
            .filter(|n| !unsuitable.contains(n))
            .collect();
        let name = entry.name.clone().unwrap_or_default();
        let unsuitable_text = if unsuitable.is_empty() {
            "none".to_owned()
        } else {
            unsuitable.join(", ")
        };
        let suitable_text = if suitable.is_empty() {
            "none".to_owned()
        } else {
            suitable
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        parts.push(format!(
            "pod claim {name}: unsuitable {unsuitable_text}; suitable {suitable_text}"
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" | "))
}

pub(super) fn newest(
    events: &[EventLine],
    pred: impl Fn(&EventLine) -> bool,
) -> Option<&EventLine> {
    events.iter().filter(|e| pred(e)).max_by_key(|e| e.time)
}

/// Every candidate node of the context is unsuitable for some pending claim.
fn all_unsuitable(facts: &Facts) -> bool {
    let Some(context) = &facts.context else {
        return false;
    };
    let potential = context.spec.potential_nodes.clone().unwrap_or_default();
    let entries = context
        .status
        .as_ref()
        .and_then(|s| s.resource_claims.clone())
        .unwrap_or_default();
    !potential.is_empty()
        && potential.iter().all(|node| {
            entries
                .iter()
                .any(|e| e.unsuitable_nodes.iter().flatten().any(|u| u == node))
        })
}

/// Why an unscheduled pod waits, in one sentence with what to do: the first claim that holds
/// it back, otherwise what the scheduler says.
fn why_pending(facts: &Facts, pod_uid: &str) -> String {
    facts
        .claims
        .iter()
        .find_map(|entry| why_claim_blocks(facts, entry, pod_uid))
        .unwrap_or_else(|| why_scheduler_waits(facts))
}

/// Why the claim of `entry` keeps the pod `pod_uid` from being scheduled, if it does.
fn why_claim_blocks(facts: &Facts, entry: &PodClaimFacts, pod_uid: &str) -> Option<String> {
    let namespace = facts.pod.metadata.namespace.as_deref().unwrap_or_default();
    let (claim, name) = match usable_claim(entry, namespace) {
        Ok(usable) => usable,
        Err(why) => return Some(why),
    };
    let status = claim.status.as_ref();
    if status.and_then(|s| s.deallocation_requested) == Some(true) {
        return Some(format!(
            "claim {name} is being deallocated by its driver so that it can be allocated \
             again where the pod fits; the pod is scheduled when that is done"
        ));
    }
    if let Some(why) = why_claim_taken(claim, &name, namespace, pod_uid) {
        return Some(why);
    }
    if !allocated(claim) && claim.spec.allocation_mode.as_deref() == Some("Immediate") {
        let cause = newest(&facts.events, |e| e.object == name && e.type_ == "Warning")
            .map_or_else(
                || "no driver event yet; check that the driver runs".to_owned(),
                |e| format!("the driver says: {}", e.note),
            );
        return Some(format!(
            "immediate claim {name} is not allocated yet: {cause}"
        ));
    }
    if let Some(warning) = newest(&facts.events, |e| {
        e.object == name && e.kind == "ResourceClaim" && e.type_ == "Warning"
    }) {
        if !allocated(claim) {
            return Some(format!(
                "claim {name} cannot be allocated: {}: {}",
                warning.reason, warning.note
            ));
        }
    }
    None
}

/// The claim of `entry` with its name, or why the pod cannot use it: the claim does not exist
/// (yet), or it is being deleted.
pub(super) fn usable_claim<'a, C: kube::Resource>(
    entry: &'a PodClaimFacts<C>,
    namespace: &str,
) -> Result<(&'a C, String), String> {
    let Some(claim) = &entry.claim else {
        return Err(why_claim_missing(entry, namespace));
    };
    let name = entry.claim_name.clone().unwrap_or_default();
    if claim.meta().deletion_timestamp.is_some() {
        return Err(format!(
            "claim {name} is being deleted: the pod cannot use it; recreate the pod (or the claim)"
        ));
    }
    Ok((claim, name))
}

/// Why the pod claim of `entry`, whose claim does not exist, waits.
fn why_claim_missing<C>(entry: &PodClaimFacts<C>, namespace: &str) -> String {
    match &entry.claim_name {
        None => format!(
            "the claim of pod claim {} is not created yet: the resourceclaim controller \
             makes it from the template; if this lasts, check that the template exists in \
             {namespace} and that kube-controller-manager runs",
            entry.pod_claim
        ),
        Some(name) => format!(
            "ResourceClaim {namespace}/{name} does not exist: create it, or point \
             spec.resourceClaims[{}] of the pod at an existing claim",
            entry.pod_claim
        ),
    }
}

/// Why the allocated claim `name` cannot take the pod `pod_uid` as one more consumer, if it
/// cannot: it is not shareable, or it has as many consumers as a claim can have.
fn why_claim_taken(
    claim: &ResourceClaim,
    name: &str,
    namespace: &str,
    pod_uid: &str,
) -> Option<String> {
    let reserved = claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.clone())
        .unwrap_or_default();
    let mine = reserved.iter().any(|r| r.uid == pod_uid);
    if !allocated(claim) || mine || reserved.is_empty() {
        return None;
    }
    let users = reserved
        .iter()
        .map(|r| format!("{namespace}/{}", r.name))
        .collect::<Vec<_>>()
        .join(", ");
    if !shareable(claim) {
        return Some(format!(
            "claim {name} is in use by pod {users} and not shareable: wait until that pod \
             ends, or let pods share the claim (spec.shareable: true in its \
             DeviceClaimParameters or in the class's DeviceClassParameters) and create the \
             claim again"
        ));
    }
    (reserved.len() >= 32).then(|| {
        format!(
            "claim {name} already has 32 consumers, the most a claim can have: wait until \
             one of them ends"
        )
    })
}

/// What the scheduler says about a pod none of whose claims holds it back.
fn why_scheduler_waits(facts: &Facts) -> String {
    let pod_name = facts.pod.metadata.name.as_deref().unwrap_or_default();
    if all_unsuitable(facts) {
        let detail = newest(&facts.events, |e| {
            e.object == pod_name && e.reason == "NoSuitableNode"
        })
        .map_or_else(
            || "every candidate node is unsuitable".to_owned(),
            |e| e.note.clone(),
        );
        return format!(
            "no node can hold all claims of the pod: {detail}; free or add devices that match, \
             or ask for fewer or other devices in the claims' parameters"
        );
    }
    scheduler_says(&facts.events, pod_name)
}

/// The scheduler's newest `FailedScheduling` message about pod `pod_name`.
pub(super) fn scheduler_says(events: &[EventLine], pod_name: &str) -> String {
    match newest(events, |e| {
        e.object == pod_name && e.reason == "FailedScheduling"
    }) {
        Some(event) => format!("the scheduler waits: {}", event.note),
        None => "the scheduler has not looked at the pod yet (no FailedScheduling event)".into(),
    }
}

/// One event of the report: type, reason, the kind of object when not the pod, the reporter
/// and the note, cut at [`NOTE_SHOWN`] characters.
fn event_line(event: &EventLine) -> String {
    let from = if event.from.is_empty() {
        String::new()
    } else {
        format!(" ({})", event.from)
    };
    let on = if event.kind.is_empty() || event.kind == "Pod" {
        String::new()
    } else {
        format!(" on {}", event.kind)
    };
    let shown: String = event.note.chars().take(NOTE_SHOWN).collect();
    let cut = if shown.len() < event.note.len() {
        " ..."
    } else {
        ""
    };
    format!(
        "event {} {}{on}{from}: {shown}{cut}",
        event.type_, event.reason
    )
}

/// The report on the pod, one line per fact, ending with the reason when it waits.
pub fn report(facts: &Facts, driver_name: &str) -> String {
    let pod = &facts.pod;
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let mut out = String::new();
    let (node, phase) = pod_line(&mut out, pod);
    if facts.claims.is_empty() {
        out.push_str("  no resource claims\n");
    }
    for entry in &facts.claims {
        let _ = writeln!(out, "  {}", claim_line(entry, driver_name));
    }
    if node.is_none() {
        if let Some(check) = node_check(facts) {
            let _ = writeln!(out, "  node check (last UnsuitableNodes): {check}");
        }
    }
    event_lines(&mut out, &facts.events, pod);
    why_line(&mut out, node.as_deref(), &phase, || {
        why_pending(facts, uid)
    });
    out
}

/// Writes the pod's line (phase and node); returns its node and phase.
pub(super) fn pod_line(out: &mut String, pod: &Pod) -> (Option<String>, String) {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into());
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    match &node {
        Some(node) => {
            let _ = writeln!(out, "pod {namespace}/{name}: {phase} on {node}");
        }
        None => {
            let _ = writeln!(out, "pod {namespace}/{name}: {phase}, not scheduled");
        }
    }
    (node, phase)
}

/// Writes the newest [`EVENTS_SHOWN`] events about the pod itself.
pub(super) fn event_lines(out: &mut String, events: &[EventLine], pod: &Pod) {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let mut events: Vec<&EventLine> = events.iter().filter(|e| e.object == name).collect();
    events.sort_by_key(|e| std::cmp::Reverse(e.time));
    for event in events.iter().take(EVENTS_SHOWN) {
        let _ = writeln!(out, "  {}", event_line(event));
    }
}

/// Writes `why: ...` for a pod that waits: `pending()` while not scheduled, the kubelet's part
/// once scheduled and still `Pending`; nothing for a pod past that.
pub(super) fn why_line(
    out: &mut String,
    node: Option<&str>,
    phase: &str,
    pending: impl FnOnce() -> String,
) {
    match (node, phase) {
        (None, _) => {
            let _ = writeln!(out, "why: {}", pending());
        }
        (Some(node), "Pending") => {
            let _ = writeln!(
                out,
                "why: scheduled on {node}; waiting for the kubelet to prepare the devices and start \
                 the containers (see the pod's events)"
            );
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
