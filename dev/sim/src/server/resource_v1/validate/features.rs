//! The validation of the fields added after 1.34's GA level (device taints and tolerations,
//! `DeviceTaintRule`, extended resource names, binding conditions, counters, per-device node
//! selection, consumable capacity), in the messages of `pkg/apis/resource/validation`
//! (the 1.36/1.37 version). Not checked: the quantity arithmetic of a capacity's
//! `requestPolicy` (ranges, steps, valid values against the capacity).
//!
//! Pure functions over the normalised JSON; no store or HTTP dependencies.

use dra_types::resource_v1::{
    EFFECT_NONE, MAX_TAINTS_PER_DEVICE, MAX_TOLERATIONS, NO_EXECUTE, NO_SCHEDULE, OP_EQUAL,
    OP_EXISTS,
};
use serde_json::Value;

use super::{capped, driver_name, duplicate, label, list, pool_name, text, too_many, MAX_DEVICES};
use crate::server::error::FieldCause;
use crate::server::validation::{is_qualified_part, key_causes, LABEL_VALUE_MSG};

/// The valid taint effects, sorted as the API server lists them.
const EFFECTS: [&str; 3] = [NO_EXECUTE, NO_SCHEDULE, EFFECT_NONE];
/// Binding conditions and binding failure conditions per device.
const MAX_BINDING_CONDITIONS: usize = 4;
/// Counter consumption entries per device (`ResourceSliceMaxDeviceCounterConsumptionsPerDevice`).
const MAX_CONSUMES_COUNTERS: usize = 2;
/// Counter sets per slice (`ResourceSliceMaxCounterSets`).
const MAX_COUNTER_SETS: usize = 8;
/// Counters per counter set, and per counter consumption.
const MAX_COUNTERS: usize = 32;
/// Devices per slice when a device has taints or consumes counters
/// (`ResourceSliceMaxDevicesWithTaintsOrConsumesCounters`).
const MAX_DEVICES_WITH_TAINTS_OR_COUNTERS: usize = 64;
/// `DeviceTaintRule` status conditions.
const MAX_RULE_CONDITIONS: usize = 8;

fn label_value(causes: &mut Vec<FieldCause>, field: &str, value: &str) {
    if value.len() > 63 {
        causes.push(FieldCause::invalid(
            field,
            value,
            "must be no more than 63 characters",
        ));
    }
    if !value.is_empty() && !is_qualified_part(value) {
        causes.push(FieldCause::invalid(field, value, LABEL_VALUE_MSG));
    }
}

/// A taint (`old`: the rule's stored taint; its effect is only checked again when it changed).
pub(super) fn taint(causes: &mut Vec<FieldCause>, field: &str, v: &Value, old: Option<&Value>) {
    causes.extend(key_causes(text(&v["key"]), &format!("{field}.key")));
    let value = text(&v["value"]);
    if !value.is_empty() {
        label_value(causes, &format!("{field}.value"), value);
    }
    let effect = text(&v["effect"]);
    if old.is_some_and(|o| text(&o["effect"]) == effect) {
        return;
    }
    if effect.is_empty() {
        causes.push(FieldCause::required(format!("{field}.effect"), ""));
    } else if !EFFECTS.contains(&effect) {
        causes.push(FieldCause::not_supported(
            format!("{field}.effect"),
            &format!("{effect:?}"),
            &EFFECTS,
        ));
    }
}

/// The taints of a device.
pub(super) fn device_taints(causes: &mut Vec<FieldCause>, at: &str, device: &Value) {
    let field = format!("{at}.taints");
    let taints = list(&device["taints"]);
    if taints.len() > MAX_TAINTS_PER_DEVICE {
        causes.push(super::too_many(&field, taints.len(), MAX_TAINTS_PER_DEVICE));
        return;
    }
    for (i, t) in taints.iter().enumerate() {
        taint(causes, &format!("{field}[{i}]"), t, None);
    }
}

/// The tolerations of a request or subrequest at `at`.
pub(super) fn tolerations(causes: &mut Vec<FieldCause>, at: &str, request: &Value) {
    let field = format!("{at}.tolerations");
    let items = list(&request["tolerations"]);
    if items.len() > MAX_TOLERATIONS {
        causes.push(super::too_many(&field, items.len(), MAX_TOLERATIONS));
        return;
    }
    for (i, t) in items.iter().enumerate() {
        let tat = format!("{field}[{i}]");
        let key = text(&t["key"]);
        if !key.is_empty() {
            causes.extend(key_causes(key, &format!("{tat}.key")));
        }
        let value = text(&t["value"]);
        match text(&t["operator"]) {
            OP_EXISTS if !value.is_empty() => causes.push(FieldCause::invalid(
                format!("{tat}.value"),
                value,
                "must be empty for operator `Exists`",
            )),
            OP_EXISTS => {}
            OP_EQUAL => label_value(causes, &format!("{tat}.value"), value),
            "" => causes.push(FieldCause::required(format!("{tat}.operator"), "")),
            other => causes.push(FieldCause::not_supported(
                format!("{tat}.operator"),
                &format!("{other:?}"),
                &[OP_EQUAL, OP_EXISTS],
            )),
        }
        let effect = text(&t["effect"]);
        if !effect.is_empty() && !EFFECTS.contains(&effect) {
            causes.push(FieldCause::not_supported(
                format!("{tat}.effect"),
                &format!("{effect:?}"),
                &EFFECTS,
            ));
        }
    }
}

/// A `DeviceTaintRule` (`old`: the stored rule of an update).
pub fn device_taint_rule(obj: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let selector = &obj["spec"]["deviceSelector"];
    let at = "spec.deviceSelector";
    if let Some(driver) = selector["driver"].as_str() {
        driver_name(&mut causes, &format!("{at}.driver"), driver);
    }
    if let Some(pool) = selector["pool"].as_str() {
        pool_name(&mut causes, &format!("{at}.pool"), pool);
    }
    if let Some(device) = selector["device"].as_str() {
        label(&mut causes, &format!("{at}.device"), device);
    }
    let old_taint = old.map(|o| &o["spec"]["taint"]);
    taint(&mut causes, "spec.taint", &obj["spec"]["taint"], old_taint);
    let conditions = list(&obj["status"]["conditions"]);
    if conditions.len() > MAX_RULE_CONDITIONS {
        causes.push(super::too_many(
            "status.conditions",
            conditions.len(),
            MAX_RULE_CONDITIONS,
        ));
    }
    causes
}

/// A class's `extendedResourceName` (`v1helper.IsExtendedResourceName`): a qualified name with
/// a domain outside `kubernetes.io`, that stays one with the quota prefix `requests.`.
pub fn extended_resource_name(obj: &Value) -> Vec<FieldCause> {
    let Some(name) = obj["spec"]["extendedResourceName"].as_str() else {
        return Vec::new();
    };
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    let quota_name = format!("requests.{name}");
    let valid = !native
        && !name.starts_with("requests.")
        && key_causes(&quota_name, "").is_empty()
        && quota_name
            .split_once('/')
            .is_some_and(|(_, n)| n.len() <= 63);
    if valid {
        Vec::new()
    } else {
        vec![FieldCause::invalid(
            "spec.extendedResourceName",
            name,
            "must be a valid extended resource name",
        )]
    }
}

fn binding_conditions(causes: &mut Vec<FieldCause>, at: &str, device: &Value) {
    let conditions: Vec<&str> = list(&device["bindingConditions"])
        .iter()
        .map(text)
        .collect();
    let failures: Vec<&str> = list(&device["bindingFailureConditions"])
        .iter()
        .map(text)
        .collect();
    for (name, items) in [
        ("bindingConditions", &conditions),
        ("bindingFailureConditions", &failures),
    ] {
        let field = format!("{at}.{name}");
        if items.len() > MAX_BINDING_CONDITIONS {
            causes.push(super::too_many(&field, items.len(), MAX_BINDING_CONDITIONS));
            continue;
        }
        for (i, c) in items.iter().enumerate() {
            causes.extend(key_causes(c, &format!("{field}[{i}]")));
            if items[..i].contains(c) {
                causes.push(duplicate(format!("{field}[{i}]"), c));
            }
        }
    }
    for (i, c) in failures.iter().enumerate() {
        if conditions.contains(c) {
            causes.push(FieldCause::invalid(
                format!("{at}.bindingFailureConditions[{i}]"),
                c,
                "bindingFailureConditions must not overlap with bindingConditions",
            ));
        }
    }
    if conditions.is_empty() && !failures.is_empty() {
        causes.push(FieldCause::invalid(
            format!("{at}.bindingConditions"),
            "[]",
            "bindingConditions are required to use bindingFailureConditions",
        ));
    }
    if failures.is_empty() && !conditions.is_empty() {
        causes.push(FieldCause::invalid(
            format!("{at}.bindingFailureConditions"),
            "[]",
            "bindingFailureConditions are required to use bindingConditions",
        ));
    }
}

fn consumes_counters(causes: &mut Vec<FieldCause>, at: &str, device: &Value) {
    let field = format!("{at}.consumesCounters");
    let entries = capped(
        causes,
        &field,
        &device["consumesCounters"],
        MAX_CONSUMES_COUNTERS,
    );
    let mut sets: Vec<&str> = Vec::new();
    for (i, c) in entries.iter().enumerate() {
        let cat = format!("{field}[{i}]");
        let set = text(&c["counterSet"]);
        if set.is_empty() {
            causes.push(FieldCause::required(format!("{cat}.counterSet"), ""));
        } else {
            label(causes, &format!("{cat}.counterSet"), set);
        }
        counters(causes, &format!("{cat}.counters"), &c["counters"]);
        if sets.contains(&set) {
            causes.push(duplicate(cat, set));
        }
        sets.push(set);
    }
}

fn node_selection(causes: &mut Vec<FieldCause>, at: &str, device: &Value, per_device: bool) {
    let node_name = device.get("nodeName").filter(|v| !v.is_null());
    let selector = device.get("nodeSelector").filter(|v| !v.is_null());
    let all_nodes = device.get("allNodes").filter(|v| !v.is_null());
    if !per_device {
        if node_name.is_some() || selector.is_some() || all_nodes.is_some() {
            causes.push(FieldCause::invalid(
                at,
                "null",
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            ));
        }
        return;
    }
    let mut set = Vec::new();
    if let Some(name) = node_name {
        if text(name).is_empty() {
            causes.push(FieldCause::invalid(
                format!("{at}.nodeName"),
                "",
                "must not be empty",
            ));
        } else {
            set.push("`nodeName`");
        }
    }
    if selector.is_some() {
        set.push("`nodeSelector`");
    }
    if let Some(all) = all_nodes {
        if all.as_bool() == Some(true) {
            set.push("`allNodes`");
        } else {
            causes.push(FieldCause::invalid(
                format!("{at}.allNodes"),
                "false",
                "must be either unset or set to true",
            ));
        }
    }
    let rule = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
    match set.len() {
        0 => causes.push(FieldCause::required(at, rule)),
        1 => {}
        _ => causes.push(FieldCause::invalid(
            at,
            &format!("{{{}}}", set.join(", ")),
            rule,
        )),
    }
}

fn request_policies(causes: &mut Vec<FieldCause>, at: &str, device: &Value) {
    let multiple = device["allowMultipleAllocations"].as_bool() == Some(true);
    for (key, capacity) in device["capacity"].as_object().into_iter().flatten() {
        let policy = &capacity["requestPolicy"];
        if policy.is_null() {
            continue;
        }
        let field = format!("{at}.capacity[{key}].requestPolicy");
        if !multiple {
            causes.push(FieldCause::forbidden(
                field,
                "allowMultipleAllocations must be true",
            ));
            continue;
        }
        let values = !list(&policy["validValues"]).is_empty();
        let range = !policy["validRange"].is_null();
        if values && range {
            causes.push(FieldCause::forbidden(
                field,
                "exactly one policy can be specified, cannot specify \"validValues\" and \"validRange\" at the same time",
            ));
        } else if (values || range) && policy["default"].is_null() {
            let which = if values { "validValues" } else { "validRange" };
            causes.push(FieldCause::required(
                format!("{field}.default"),
                &format!("required when {which} is defined"),
            ));
        } else if range && policy["validRange"]["min"].is_null() {
            causes.push(FieldCause::required(
                format!("{field}.validRange.min"),
                "required when validRange is defined",
            ));
        }
    }
}

/// The per-device rules of the later features for the device at `at` of a slice whose
/// `perDeviceNodeSelection` is `per_device`.
pub(super) fn device(causes: &mut Vec<FieldCause>, at: &str, device: &Value, per_device: bool) {
    device_taints(causes, at, device);
    consumes_counters(causes, at, device);
    node_selection(causes, at, device, per_device);
    binding_conditions(causes, at, device);
    request_policies(causes, at, device);
}

/// A map of counters: at least one, at most [`MAX_COUNTERS`].
fn counters(causes: &mut Vec<FieldCause>, field: &str, v: &Value) {
    match v.as_object().map(serde_json::Map::len) {
        None | Some(0) => causes.push(FieldCause::required(field, "")),
        Some(n) if n > MAX_COUNTERS => causes.push(too_many(field, n, MAX_COUNTERS)),
        Some(_) => {}
    }
}

/// The limits 1.35+ puts on a slice of a partitionable pool: counter sets and devices in
/// separate slices of the pool, at most [`MAX_COUNTER_SETS`] sets, and at most
/// [`MAX_DEVICES_WITH_TAINTS_OR_COUNTERS`] devices once one has taints or consumes counters.
/// (Upstream refuses both lists present even empty; the server leaves empty lists out first.)
pub(super) fn partitionable_limits(causes: &mut Vec<FieldCause>, spec: &Value) {
    let devices = list(&spec["devices"]);
    if !devices.is_empty() && !list(&spec["sharedCounters"]).is_empty() {
        causes.push(FieldCause::invalid(
            "spec",
            "",
            "only one of `sharedCounters` or `devices` is allowed",
        ));
    }
    let advanced = devices
        .iter()
        .any(|d| !list(&d["taints"]).is_empty() || !list(&d["consumesCounters"]).is_empty());
    // Past 128 the general limit speaks already.
    if advanced && (MAX_DEVICES_WITH_TAINTS_OR_COUNTERS + 1..=MAX_DEVICES).contains(&devices.len())
    {
        causes.push(too_many(
            "spec.devices",
            devices.len(),
            MAX_DEVICES_WITH_TAINTS_OR_COUNTERS,
        ));
    }
}

/// A slice's `sharedCounters`: named (DNS labels), unique, each with counters.
pub(super) fn shared_counters(causes: &mut Vec<FieldCause>, spec: &Value) {
    let mut names: Vec<&str> = Vec::new();
    let sets = capped(
        causes,
        "spec.sharedCounters",
        &spec["sharedCounters"],
        MAX_COUNTER_SETS,
    );
    for (i, set) in sets.iter().enumerate() {
        let at = format!("spec.sharedCounters[{i}]");
        let name = text(&set["name"]);
        label(causes, &format!("{at}.name"), name);
        if names.contains(&name) {
            causes.push(duplicate(format!("{at}.name"), name));
        }
        names.push(name);
        counters(causes, &format!("{at}.counters"), &set["counters"]);
    }
}
