//! Pure helpers for PodSchedulingContext status: list truncation and the JSON patch that writes
//! only this driver's entries.
//!
//! No I/O; must not depend on the API client, the queue or the driver.

use json_patch::Patch;
use k8s_openapi::api::resource::v1alpha2::PodSchedulingContext;
use serde_json::{json, Value};

/// `PodSchedulingNodeListMaxSize` of resource.k8s.io/v1alpha2.
pub const NODE_LIST_MAX_SIZE: usize = 128;

/// Caps an unsuitable-node list at [`NODE_LIST_MAX_SIZE`]. The list of "potential nodes + the
/// selected node" can be one too long: when the first element is the selected node the end is
/// dropped, otherwise the front, so that the selected node stays listed.
pub fn truncate_nodes(mut nodes: Vec<String>, selected_node: Option<&str>) -> Vec<String> {
    if nodes.len() > NODE_LIST_MAX_SIZE {
        let excess = nodes.len() - NODE_LIST_MAX_SIZE;
        if selected_node.is_some_and(|s| nodes[0] == s) {
            nodes.truncate(NODE_LIST_MAX_SIZE);
        } else {
            nodes.drain(..excess);
        }
    }
    nodes
}

/// One of our entries of `status.resourceClaims`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimStatusEntry {
    /// The pod claim name.
    pub name: String,
    /// Unsuitable nodes, already truncated.
    pub unsuitable_nodes: Vec<String>,
}

fn entry_value(entry: &ClaimStatusEntry) -> Value {
    json!({"name": entry.name, "unsuitableNodes": entry.unsuitable_nodes})
}

/// The JSON patch that brings our `entries` into the context's status, or `None` when every entry
/// is already there with the same list. Entries of other drivers are neither read nor written; the
/// patch starts with a `test` of the context's resourceVersion so it applies only to the copy the
/// indices were computed from.
pub fn status_patch(context: &PodSchedulingContext, entries: &[ClaimStatusEntry]) -> Option<Patch> {
    let existing = context
        .status
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref());
    let mut ops = Vec::new();
    let mut appended = Vec::new();
    for entry in entries {
        let found = existing.and_then(|list| {
            list.iter()
                .position(|e| e.name.as_deref() == Some(entry.name.as_str()))
                .map(|i| (i, &list[i]))
        });
        match found {
            Some((i, current)) => {
                if current.unsuitable_nodes.as_deref().unwrap_or_default() != entry.unsuitable_nodes
                {
                    ops.push(json!({
                        "op": "replace",
                        "path": format!("/status/resourceClaims/{i}"),
                        "value": entry_value(entry),
                    }));
                }
            }
            None => appended.push(entry_value(entry)),
        }
    }
    if !appended.is_empty() {
        match (context.status.as_ref(), existing) {
            (_, Some(_)) => ops.extend(appended.into_iter().map(
                |value| json!({"op": "add", "path": "/status/resourceClaims/-", "value": value}),
            )),
            (Some(_), None) => ops.push(json!({
                "op": "add",
                "path": "/status/resourceClaims",
                "value": appended,
            })),
            (None, None) => ops.push(json!({
                "op": "add",
                "path": "/status",
                "value": {"resourceClaims": appended},
            })),
        }
    }
    if ops.is_empty() {
        return None;
    }
    if let Some(rv) = &context.metadata.resource_version {
        ops.insert(
            0,
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}),
        );
    }
    Some(serde_json::from_value(Value::Array(ops)).expect("patch operations are well-formed"))
}

#[cfg(test)]
mod tests;
