//! Response shapes: plain objects and lists, `PartialObjectMetadata(List)` and `meta.k8s.io/v1`
//! Tables, chosen from the Accept header as the API server does.
//!
//! Pure functions over `serde_json::Value`; no store or HTTP server dependencies.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::resources::ResourceInfo;

/// The representation asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The objects themselves.
    Json,
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
    /// A `Table`; the flag says whether rows carry the full object (`includeObject=Object`).
    Table {
        /// Rows embed the whole object instead of its metadata.
        full_object: bool,
    },
}

/// Picks the representation from the Accept header (first supported entry wins).
pub fn negotiate(accept: Option<&str>, include_object: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Json;
    };
    for entry in accept.split(',') {
        let entry = entry.trim();
        if entry.contains("as=Table") {
            return Format::Table {
                full_object: include_object == Some("Object"),
            };
        }
        if entry.contains("as=PartialObjectMetadata") {
            return Format::Metadata;
        }
        if entry.starts_with("application/json")
            || entry.starts_with("*/*")
            || entry.starts_with("application/*")
        {
            return Format::Json;
        }
    }
    Format::Json
}

fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"].clone()})
}

/// Renders one object.
pub fn object(format: Format, info: &ResourceInfo, obj: &Value) -> Value {
    match format {
        Format::Json => obj.clone(),
        Format::Metadata => partial_metadata(obj),
        Format::Table { full_object } => table(info, &[obj], full_object, None, true),
    }
}

/// Renders a list as the bytes of its body. JSON, the common case, serializes the stored
/// items in place rather than copying each into a new document.
pub fn list(
    format: Format,
    info: &ResourceInfo,
    items: &[Arc<Value>],
    rv: u64,
    continue_token: Option<&str>,
    remaining: Option<usize>,
) -> Vec<u8> {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(n) = remaining {
        metadata["remainingItemCount"] = json!(n);
    }
    let encoded = match format {
        Format::Json => serde_json::to_vec(&JsonList {
            api_version: info.api_version(),
            items: Items(items),
            kind: info.list_kind(),
            metadata,
        }),
        Format::Metadata => serde_json::to_vec(&json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "items": items.iter().map(|o| partial_metadata(o)).collect::<Vec<_>>(),
        })),
        Format::Table { full_object } => {
            let refs: Vec<&Value> = items.iter().map(AsRef::as_ref).collect();
            serde_json::to_vec(&table(info, &refs, full_object, Some(metadata), true))
        }
    };
    // Every part is a `Value` or a string: serialization cannot fail.
    encoded.unwrap_or_default()
}

/// A JSON list whose items are borrowed from the store.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonList<'a> {
    api_version: String,
    items: Items<'a>,
    kind: String,
    metadata: Value,
}

/// Stored objects serialized as a sequence, each as it is.
struct Items<'a>(&'a [Arc<Value>]);

impl serde::Serialize for Items<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(AsRef::<Value>::as_ref))
    }
}

/// Renders a watch event object as a single-row Table (column definitions omitted after the first).
pub fn watch_table_row(info: &ResourceInfo, obj: &Value, full_object: bool, first: bool) -> Value {
    table(info, &[obj], full_object, None, first)
}

fn column(name: &str, format: &str, description: &str) -> Value {
    json!({"name": name, "type": "string", "format": format, "description": description, "priority": 0})
}

fn columns(kind: &str) -> Vec<Value> {
    let name = column("Name", "name", "Name must be unique within a namespace.");
    let age = column("Age", "", "CreationTimestamp is a timestamp representing the server time when this object was created.");
    match kind {
        "Pod" => vec![
            name,
            column(
                "Ready",
                "",
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            column(
                "Status",
                "",
                "The aggregate status of the containers in this pod.",
            ),
            column(
                "Restarts",
                "",
                "The number of times the containers in this pod have been restarted.",
            ),
            age,
            column("Node", "", "The name of the node the pod is assigned to."),
        ],
        "Node" | "Namespace" => vec![name, column("Status", "", "The status of the object."), age],
        "Event" => vec![
            column("Last Seen", "", "Time of the last occurrence."),
            column("Type", "", "Type of this event (Normal, Warning)."),
            column("Reason", "", "Why the action was taken."),
            column("Object", "", "The object this event is about."),
            column("Message", "", "A human-readable description."),
        ],
        "ResourceClaim" => vec![
            name,
            column("ResourceClassName", "", "The resource class of the claim."),
            column("AllocationMode", "", "When the claim gets allocated."),
            column("State", "", "Allocation and reservation state."),
            age,
        ],
        _ => vec![name, age],
    }
}

fn cells(kind: &str, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(obj["metadata"]["name"].as_str().unwrap_or_default());
    let age = json!(age(obj, now));
    let deleting = obj["metadata"]["deletionTimestamp"].is_string();
    match kind {
        "Pod" => {
            let total = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let statuses = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array);
            let ready = statuses.map_or(0, |s| {
                s.iter()
                    .filter(|c| c["ready"].as_bool() == Some(true))
                    .count()
            });
            let restarts: u64 = statuses.map_or(0, |s| {
                s.iter().filter_map(|c| c["restartCount"].as_u64()).sum()
            });
            let phase = if deleting {
                "Terminating"
            } else {
                obj["status"]["phase"].as_str().unwrap_or("Pending")
            };
            let node = obj["spec"]["nodeName"].as_str().unwrap_or("<none>");
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(phase),
                json!(restarts),
                age,
                json!(node),
            ]
        }
        "Node" => {
            let ready = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .map_or("Unknown", |c| {
                    if c["status"] == "True" {
                        "Ready"
                    } else {
                        "NotReady"
                    }
                });
            vec![name, json!(ready), age]
        }
        "Namespace" => vec![
            name,
            json!(obj["status"]["phase"].as_str().unwrap_or("Active")),
            age,
        ],
        "Event" => event_cells(obj, now),
        "ResourceClaim" => {
            let mut state = Vec::new();
            if obj
                .pointer("/status/allocation")
                .is_some_and(|a| !a.is_null())
            {
                state.push("allocated");
            }
            if obj
                .pointer("/status/reservedFor")
                .and_then(Value::as_array)
                .is_some_and(|r| !r.is_empty())
            {
                state.push("reserved");
            }
            if deleting {
                state.push("deleted");
            }
            let state = if state.is_empty() {
                "pending".to_string()
            } else {
                state.join(",")
            };
            vec![
                name,
                json!(obj["spec"]["resourceClassName"]
                    .as_str()
                    .unwrap_or_default()),
                json!(obj["spec"]["allocationMode"].as_str().unwrap_or_default()),
                json!(state),
                age,
            ]
        }
        _ => vec![name, age],
    }
}

fn event_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let pick = |fields: &[&str]| {
        fields
            .iter()
            .find_map(|f| obj[*f].as_str().filter(|s| !s.is_empty()))
    };
    let last = pick(&["lastTimestamp", "eventTime", "deprecatedLastTimestamp"])
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or_else(
            || "<unknown>".to_string(),
            |t| human_duration((now - t.with_timezone(&Utc)).num_seconds().max(0)),
        );
    let regarding = if obj["involvedObject"].is_object() {
        &obj["involvedObject"]
    } else {
        &obj["regarding"]
    };
    let object = format!(
        "{}/{}",
        regarding["kind"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase(),
        regarding["name"].as_str().unwrap_or_default()
    );
    vec![
        json!(last),
        json!(obj["type"].as_str().unwrap_or_default()),
        json!(obj["reason"].as_str().unwrap_or_default()),
        json!(object),
        json!(pick(&["message", "note"]).unwrap_or_default()),
    ]
}

fn table(
    info: &ResourceInfo,
    objs: &[&Value],
    full_object: bool,
    metadata: Option<Value>,
    with_columns: bool,
) -> Value {
    let now = Utc::now();
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let object = if full_object {
                (*o).clone()
            } else {
                partial_metadata(o)
            };
            json!({"cells": cells(&info.kind, o, now), "object": object})
        })
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata.unwrap_or_else(|| json!({})),
        "rows": rows,
    });
    if with_columns {
        t["columnDefinitions"] = Value::Array(columns(&info.kind));
    }
    t
}

fn age(obj: &Value, now: DateTime<Utc>) -> String {
    let Some(created) = obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
    else {
        return "<unknown>".into();
    };
    human_duration((now - created.with_timezone(&Utc)).num_seconds().max(0))
}

/// Short human durations in the style of kubectl (`45s`, `3m20s`, `5h`, `12d`).
pub fn human_duration(secs: i64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        format!("{m}m{}s", secs % 60)
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        format!("{h}h{}m", m % 60)
    } else if d < 2 {
        format!("{h}h")
    } else if d < 8 {
        format!("{d}d{}h", h % 24)
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_selects_table_metadata_or_json() {
        assert_eq!(
            negotiate(
                Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
                None
            ),
            Format::Table { full_object: false }
        );
        assert_eq!(
            negotiate(
                Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
                None
            ),
            Format::Metadata
        );
        assert_eq!(
            negotiate(
                Some("application/vnd.kubernetes.protobuf, application/json"),
                None
            ),
            Format::Json
        );
        assert_eq!(negotiate(None, None), Format::Json);
    }

    #[test]
    fn human_durations_match_kubectl_style() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3 * 86_400 + 7200), "3d2h");
    }
}
