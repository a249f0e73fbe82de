//! What a stalled demo prints about the pods that never started: where each is bound, why the
//! scheduler says it waits (its `PodScheduled` condition), the state of each of its claims and
//! its scheduling context (1.30). Read from the simulated API server's store as JSON, so that
//! the same text serves both Kubernetes releases.
//!
//! Pure formatting over the store's objects: no writes.

use dra_sim::server::StoreReader;
use serde_json::Value;

use super::setup::NAMESPACE;

/// How many waiting pods are described at most.
const MAX_DESCRIBED: usize = 10;

/// One block of lines per pod of the demo that has not started (no phase, or `Pending`).
pub fn describe_waiting_pods(store: &StoreReader) -> Vec<String> {
    let pods = store.list("", "pods", Some(NAMESPACE));
    let waiting: Vec<&Value> = pods
        .iter()
        .filter(|pod| {
            let phase = pod.pointer("/status/phase").and_then(Value::as_str);
            phase.is_none_or(|p| p == "Pending")
        })
        .collect();
    let mut lines = Vec::new();
    if waiting.len() > MAX_DESCRIBED {
        lines.push(format!(
            "the first {MAX_DESCRIBED} of {} pods that did not start:",
            waiting.len()
        ));
    } else if !waiting.is_empty() {
        lines.push("pods that did not start:".to_owned());
    }
    for pod in waiting.into_iter().take(MAX_DESCRIBED) {
        lines.extend(describe_pod(
            pod,
            &|name| store.get("resource.k8s.io", "resourceclaims", Some(NAMESPACE), name),
            &|name| {
                store.get(
                    "resource.k8s.io",
                    "podschedulingcontexts",
                    Some(NAMESPACE),
                    name,
                )
            },
        ));
    }
    lines
}

fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The lines about one pod; `claim` and `context` look objects up by name.
fn describe_pod(
    pod: &Value,
    claim: &dyn Fn(&str) -> Option<Value>,
    context: &dyn Fn(&str) -> Option<Value>,
) -> Vec<String> {
    let name = text(pod, "/metadata/name").unwrap_or("?");
    let node = text(pod, "/spec/nodeName")
        .map_or_else(|| "not bound".to_owned(), |node| format!("bound to {node}"));
    let scheduled = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| text(c, "/type") == Some("PodScheduled"))
        .map_or_else(
            || "no PodScheduled condition".to_owned(),
            |c| {
                format!(
                    "PodScheduled={} {}: {}",
                    text(c, "/status").unwrap_or("?"),
                    text(c, "/reason").unwrap_or(""),
                    text(c, "/message").unwrap_or("")
                )
            },
        );
    let mut lines = vec![format!("  {name}: {node}; {scheduled}")];
    for named in claim_names(pod) {
        let line = match named {
            PodClaimName::Claim(name) => {
                let state =
                    claim(&name).map_or_else(|| "not found".to_owned(), |c| claim_state(&c));
                format!("    claim {name}: {state}")
            }
            PodClaimName::NotCreated(pod_claim) => {
                format!("    claim of {pod_claim}: not created yet")
            }
        };
        lines.push(line);
    }
    if let Some(ctx) = context(name) {
        lines.push(format!("    scheduling context: {}", context_state(&ctx)));
    }
    lines
}

/// One claim of a pod, as its spec and status name it.
enum PodClaimName {
    /// The claim's object name: named directly, or recorded in the status when made from a
    /// template.
    Claim(String),
    /// A claim made from a template and not recorded yet: the pod's name for it.
    NotCreated(String),
}

/// The names of the pod's claims.
fn claim_names(pod: &Value) -> Vec<PodClaimName> {
    let entries = pod
        .pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let statuses = pod
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries
        .iter()
        .map(|entry| {
            let direct = text(entry, "/source/resourceClaimName")
                .or_else(|| text(entry, "/resourceClaimName"));
            if let Some(direct) = direct {
                return PodClaimName::Claim(direct.to_owned());
            }
            let pod_claim = text(entry, "/name").unwrap_or_default();
            statuses
                .iter()
                .find(|s| text(s, "/name") == Some(pod_claim))
                .and_then(|s| text(s, "/resourceClaimName"))
                .map_or_else(
                    || PodClaimName::NotCreated(pod_claim.to_owned()),
                    |name| PodClaimName::Claim(name.to_owned()),
                )
        })
        .collect()
}

/// Every string of a node selector's terms (the node names our drivers write).
fn selector_values(selector: Option<&Value>) -> Vec<String> {
    let mut values = Vec::new();
    for term in selector
        .and_then(|s| s.get("nodeSelectorTerms"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for requirement in ["matchFields", "matchExpressions"]
            .iter()
            .filter_map(|k| term.get(*k).and_then(Value::as_array))
            .flatten()
        {
            values.extend(
                requirement
                    .get("values")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned),
            );
        }
    }
    values
}

/// A claim's allocation, consumers and deallocation request in one phrase.
fn claim_state(claim: &Value) -> String {
    let mut parts = Vec::new();
    match claim.pointer("/status/allocation") {
        None | Some(Value::Null) => parts.push("not allocated".to_owned()),
        Some(allocation) => {
            let selector = allocation
                .get("availableOnNodes")
                .or_else(|| allocation.get("nodeSelector"));
            let nodes = selector_values(selector);
            parts.push(if nodes.is_empty() {
                "allocated".to_owned()
            } else {
                format!("allocated on {}", nodes.join(", "))
            });
        }
    }
    let reserved: Vec<&str> = claim
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| text(r, "/name"))
        .collect();
    parts.push(if reserved.is_empty() {
        "reserved for no one".to_owned()
    } else {
        format!("reserved for {}", reserved.join(", "))
    });
    if claim.pointer("/status/deallocationRequested") == Some(&Value::Bool(true)) {
        parts.push("deallocation requested".to_owned());
    }
    if claim.pointer("/metadata/deletionTimestamp").is_some() {
        parts.push("being deleted".to_owned());
    }
    parts.join(", ")
}

/// A scheduling context's selected node, potential nodes and the drivers' reports.
fn context_state(context: &Value) -> String {
    let selected = text(context, "/spec/selectedNode").unwrap_or("none");
    let potential = context
        .pointer("/spec/potentialNodes")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let reports: Vec<String> = context
        .pointer("/status/resourceClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|entry| {
            let unsuitable: Vec<&str> = entry
                .get("unsuitableNodes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "{} unsuitable on [{}]",
                text(entry, "/name").unwrap_or("?"),
                unsuitable.join(", ")
            )
        })
        .collect();
    let reports = if reports.is_empty() {
        "no driver report".to_owned()
    } else {
        format!("reports: {}", reports.join("; "))
    };
    format!("selected node {selected}, {potential} potential nodes, {reports}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_waiting_pod_is_described_with_its_claims_and_context() {
        let pod = json!({
            "metadata": {"name": "demo-00003"},
            "spec": {"resourceClaims": [
                {"name": "gpu-0", "source": {"resourceClaimTemplateName": "one-gpu"}},
                {"name": "gpu-1", "source": {"resourceClaimTemplateName": "one-gpu"}},
                {"name": "gpu-2", "source": {"resourceClaimName": "immediate-0"}}
            ]},
            "status": {
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                "message": "waiting for resource driver to allocate resource"}],
                "resourceClaimStatuses": [{"name": "gpu-0", "resourceClaimName": "demo-00003-gpu-0-x"}]
            }
        });
        let claim = |name: &str| match name {
            "demo-00003-gpu-0-x" => Some(json!({"status": {
                "allocation": {"availableOnNodes": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}
                ]}},
                "deallocationRequested": true
            }})),
            _ => None,
        };
        let context = |_: &str| {
            Some(json!({
                "spec": {"selectedNode": "node-2", "potentialNodes": ["node-1", "node-2"]},
                "status": {"resourceClaims": [{"name": "gpu-0", "unsuitableNodes": ["node-1"]}]}
            }))
        };
        let lines = describe_pod(&pod, &claim, &context);
        assert_eq!(
            lines,
            [
                "  demo-00003: not bound; PodScheduled=False Unschedulable: waiting for resource driver to allocate resource",
                "    claim demo-00003-gpu-0-x: allocated on node-2, reserved for no one, deallocation requested",
                "    claim of gpu-1: not created yet",
                "    claim immediate-0: not found",
                "    scheduling context: selected node node-2, 2 potential nodes, reports: gpu-0 unsuitable on [node-1]",
            ]
        );
    }

    #[test]
    fn a_bound_pod_without_context_shows_its_node_and_consumers() {
        let pod = json!({
            "metadata": {"name": "demo-00009"},
            "spec": {"nodeName": "node-0", "resourceClaims": [{"name": "gpu-0", "resourceClaimName": "c"}]}
        });
        let claim = |_: &str| {
            Some(json!({"status": {
                "allocation": {"devices": {"results": []}},
                "reservedFor": [{"resource": "pods", "name": "demo-00009", "uid": "u"}]
            }}))
        };
        let lines = describe_pod(&pod, &claim, &|_| None);
        assert_eq!(
            lines,
            [
                "  demo-00009: bound to node-0; no PodScheduled condition",
                "    claim c: allocated, reserved for demo-00009",
            ]
        );
    }
}
