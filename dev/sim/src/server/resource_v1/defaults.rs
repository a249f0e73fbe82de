//! The defaults a 1.34 to 1.37 API server gives `resource.k8s.io/v1` objects on every write: each
//! request (and each `firstAvailable` alternative) gets `allocationMode: ExactCount` and, in that
//! mode, `count: 1`, and each of its tolerations `operator: Equal`; a `DeviceClass`, a
//! `DeviceTaintRule` and a `ResourceSlice` start at `metadata.generation` 1 (set by the create
//! handler for kinds that track generation). The strategies also stamp taints without a
//! `timeAdded` ([`taint_times`]).
//!
//! Pure functions over JSON; no store or HTTP dependencies.

use dra_types::resource_v1::{EXACT_COUNT, OP_EQUAL};
use serde_json::{json, Value};

fn default_mode_and_count(request: &mut Value) {
    for toleration in request
        .get_mut("tolerations")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        if toleration
            .get("operator")
            .is_none_or(|o| o.is_null() || o == "")
        {
            toleration.insert("operator".into(), json!(OP_EQUAL));
        }
    }
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

/// Sets `timeAdded` of the taints of `new` (an object of `kind`) that have none, to `now`, as the
/// slice and rule strategies do; a rule whose effect changed while its time stayed that of `old`
/// gets `now` too.
pub fn taint_times(kind: &str, new: &mut Value, old: Option<&Value>, now: &str) {
    let stamp = |taint: &mut Value| {
        if taint.is_object() && taint.get("timeAdded").is_none_or(Value::is_null) {
            taint["timeAdded"] = json!(now);
        }
    };
    match kind {
        "ResourceSlice" => {
            let devices = new
                .pointer_mut("/spec/devices")
                .and_then(Value::as_array_mut);
            for device in devices.into_iter().flatten() {
                let taints = device.get_mut("taints").and_then(Value::as_array_mut);
                taints.into_iter().flatten().for_each(stamp);
            }
        }
        "DeviceTaintRule" => {
            let Some(taint) = new.pointer_mut("/spec/taint") else {
                return;
            };
            if let Some(old) = old.and_then(|o| o.pointer("/spec/taint")) {
                if old["effect"] != taint["effect"] && old["timeAdded"] == taint["timeAdded"] {
                    taint["timeAdded"] = json!(now);
                }
            }
            stamp(taint);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taints_get_their_time_and_a_rule_changing_its_effect_a_new_one() {
        let mut slice = json!({"spec": {"devices": [{"name": "a", "taints": [
            {"key": "k", "effect": "NoSchedule"},
            {"key": "j", "effect": "None", "timeAdded": "2026-01-01T00:00:00Z"}]}]}});
        taint_times("ResourceSlice", &mut slice, None, "2026-05-01T00:00:00Z");
        let taints = &slice["spec"]["devices"][0]["taints"];
        assert_eq!(taints[0]["timeAdded"], "2026-05-01T00:00:00Z");
        assert_eq!(taints[1]["timeAdded"], "2026-01-01T00:00:00Z");

        let old = json!({"spec": {"taint": {"key": "k", "effect": "None",
            "timeAdded": "2026-01-01T00:00:00Z"}}});
        let mut rule = old.clone();
        rule["spec"]["taint"]["effect"] = json!("NoExecute");
        taint_times(
            "DeviceTaintRule",
            &mut rule,
            Some(&old),
            "2026-05-01T00:00:00Z",
        );
        assert_eq!(rule["spec"]["taint"]["timeAdded"], "2026-05-01T00:00:00Z");
        let mut renamed = old.clone();
        renamed["spec"]["taint"]["key"] = json!("other");
        taint_times(
            "DeviceTaintRule",
            &mut renamed,
            Some(&old),
            "2026-05-01T00:00:00Z",
        );
        assert_eq!(
            renamed["spec"]["taint"]["timeAdded"],
            "2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn a_toleration_without_an_operator_gets_equal() {
        let mut spec = json!({"devices": {"requests": [{"name": "a", "exactly": {
            "deviceClassName": "c", "tolerations": [{"key": "k"}, {"operator": "Exists"}]}}]}});
        claim_spec(&mut spec);
        let tolerations = &spec["devices"]["requests"][0]["exactly"]["tolerations"];
        assert_eq!(tolerations[0]["operator"], "Equal");
        assert_eq!(tolerations[1]["operator"], "Exists");
    }

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
