//! Version conversion between a resource's storage form and the form of the API version a client
//! uses: `events.k8s.io/v1` Events share storage with core/v1 Events (stored in core form), so
//! events written through either API are visible in both, as on the real server; the versions of
//! `resource.k8s.io` a `v1`-generation server serves are stored as `v1` (their conversion is
//! `super::resource_v1`'s).
//!
//! Pure functions over `serde_json::Value`; no store or HTTP dependencies.

use serde_json::{json, Map, Value};

use super::resources::ResourceInfo;

/// Core/v1 Event field names and their events.k8s.io/v1 names.
const EVENT_RENAMES: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn is_events_v1(info: &ResourceInfo) -> bool {
    info.group == "events.k8s.io" && info.plural == "events"
}

fn rename(obj: &Map<String, Value>, from_core: bool) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in obj {
        let renamed = EVENT_RENAMES.iter().find_map(|(core, v1)| {
            let (src, dst) = if from_core { (core, v1) } else { (v1, core) };
            (k == src).then_some(*dst)
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    out
}

/// The object as a client of `info`'s API version sees it (sets `apiVersion`; converts events).
pub fn present(info: &ResourceInfo, stored: &Value) -> Value {
    let mut out = match stored.as_object() {
        Some(m) if is_events_v1(info) => Value::Object(rename(m, true)),
        _ => super::resource_v1::from_storage(info, stored),
    };
    out["apiVersion"] = json!(info.api_version());
    out
}

/// Whether [`present`] would change the stored object.
pub fn needs_presenting(info: &ResourceInfo, stored: &Value) -> bool {
    is_events_v1(info)
        || !stored["apiVersion"]
            .as_str()
            .is_some_and(|v| info.is_api_version(v))
}

/// The storage form of an object written through `info`'s API version.
pub fn to_storage(info: &ResourceInfo, incoming: Value) -> Value {
    match incoming.as_object() {
        Some(m) if is_events_v1(info) => {
            let mut out = rename(m, false);
            out.insert("apiVersion".into(), json!("v1"));
            Value::Object(out)
        }
        _ => super::resource_v1::to_storage(info, incoming),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::resources::builtin_resources;

    #[test]
    fn events_round_trip_between_core_and_events_v1() {
        let info = builtin_resources()
            .into_iter()
            .find(|r| r.group == "events.k8s.io")
            .unwrap();
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Scheduled",
            "reportingController": "ctl", "deprecatedCount": 2});
        let stored = to_storage(&info, v1.clone());
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "hello");
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(present(&info, &stored), v1);
    }
}
