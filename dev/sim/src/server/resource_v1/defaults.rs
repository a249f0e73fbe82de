//! The defaults a 1.34 API server gives `resource.k8s.io/v1` objects on every write: each request
//! (and each `firstAvailable` alternative) gets `allocationMode: ExactCount` and, in that mode,
//! `count: 1`; a `DeviceClass` and a `ResourceSlice` start at `metadata.generation` 1 (set by the
//! create handler for kinds that track generation).
//!
//! Pure functions over JSON; no store or HTTP dependencies.

use dra_types::resource_v1::EXACT_COUNT;
use serde_json::{json, Value};

fn default_mode_and_count(request: &mut Value) {
    let Some(r) = request.as_object_mut() else {
        return;
    };
    if r.get("allocationMode")
        .is_none_or(|m| m.is_null() || m == "")
    {
        r.insert("allocationMode".into(), json!(EXACT_COUNT));
    }
    let exact = r.get("allocationMode").and_then(Value::as_str) == Some(EXACT_COUNT);
    if exact && r.get("count").is_none_or(|c| c.is_null() || c == 0) {
        r.insert("count".into(), json!(1));
    }
}

/// Defaults the requests of a claim spec (`spec` of a claim, `spec.spec` of a template).
pub fn claim_spec(spec: &mut Value) {
    let Some(requests) = spec
        .pointer_mut("/devices/requests")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for request in requests {
        if let Some(exactly) = request.get_mut("exactly").filter(|e| e.is_object()) {
            default_mode_and_count(exactly);
        }
        if let Some(subs) = request
            .get_mut("firstAvailable")
            .and_then(Value::as_array_mut)
        {
            subs.iter_mut().for_each(default_mode_and_count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_get_exact_count_one_and_all_keeps_no_count() {
        let mut spec = json!({"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu"}},
            {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
            {"name": "c", "exactly": {"deviceClassName": "gpu", "count": 3}},
            {"name": "d", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]},
        ]}});
        claim_spec(&mut spec);
        let r = &spec["devices"]["requests"];
        assert_eq!(r[0]["exactly"]["allocationMode"], "ExactCount");
        assert_eq!(r[0]["exactly"]["count"], 1);
        assert_eq!(r[1]["exactly"]["allocationMode"], "All");
        assert!(r[1]["exactly"].get("count").is_none());
        assert_eq!(r[2]["exactly"]["count"], 3);
        assert_eq!(r[3]["firstAvailable"][0]["allocationMode"], "ExactCount");
        assert_eq!(r[3]["firstAvailable"][0]["count"], 1);
    }
}
