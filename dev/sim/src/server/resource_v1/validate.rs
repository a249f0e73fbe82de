//! The validation a 1.34 to 1.37 API server applies to `resource.k8s.io/v1` objects (names,
//! limits, one-of rules, references between requests, the claim status rules and immutable
//! fields), in the messages of `pkg/apis/resource/validation`; the fields of the later features
//! and `DeviceTaintRule` are checked by [`features`], one `status.devices` entry by
//! `device_status`. Not checked here: CEL compilation and cost
//! (expressions are only checked for presence and length); the namespace label that
//! `adminAccess` needs is `super::admin_access`'s.
//!
//! Pure functions over the normalised JSON of an object; no store or HTTP dependencies.

use dra_types::resource_v1::{
    ALL, EXACT_COUNT, FROM_CLAIM, FROM_CLASS,
    MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE as MAX_ATTRIBUTES,
    MAX_ATTRIBUTE_VALUE_LENGTH as MAX_ATTRIBUTE_VALUE, MAX_DEVICES_PER_SLICE as MAX_DEVICES,
};
use serde_json::Value;

use crate::server::error::FieldCause;
use crate::server::validation::{is_dns_label, is_dns_subdomain, LABEL_MSG, SUBDOMAIN_MSG};

mod features;

pub use features::device_taint_rule;

/// Requests, constraints, claim configs and selectors per list.
const MAX_LIST: usize = 32;
/// Alternatives of `firstAvailable`.
const MAX_SUBREQUESTS: usize = 8;
/// CEL expressions and opaque parameters, in bytes.
const MAX_EXPRESSION: usize = 10 * 1024;
/// `status.reservedFor` entries.
const MAX_RESERVED_FOR: usize = 256;
/// Allocation results.
const MAX_RESULTS: usize = 32;
/// Allocation configuration entries.
const MAX_ALLOCATION_CONFIG: usize = 64;

const C_IDENTIFIER_MSG: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')";

fn is_c_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The items of the list `v` at `field`, with a cause when there are more than `max`.
fn capped<'a>(causes: &mut Vec<FieldCause>, field: &str, v: &'a Value, max: usize) -> &'a [Value] {
    let items = list(v);
    if items.len() > max {
        causes.push(too_many(field, items.len(), max));
    }
    items
}

fn too_many(field: &str, count: usize, max: usize) -> FieldCause {
    FieldCause {
        reason: "FieldValueTooMany",
        field: field.to_owned(),
        message: format!("Too many: {count}: must have at most {max} items"),
    }
}

fn duplicate(field: String, value: &str) -> FieldCause {
    FieldCause {
        reason: "FieldValueDuplicate",
        field,
        message: format!("Duplicate value: {value:?}"),
    }
}

fn label(causes: &mut Vec<FieldCause>, field: &str, value: &str) {
    if value.is_empty() {
        causes.push(FieldCause::required(field, ""));
    } else if !is_dns_label(value) {
        causes.push(FieldCause::invalid(field, value, LABEL_MSG));
    }
}

/// A driver name: at most 63 characters, a DNS subdomain once lower-cased (the CSI driver rule).
fn driver_name(causes: &mut Vec<FieldCause>, field: &str, value: &str) {
    if value.is_empty() {
        causes.push(FieldCause::required(field, ""));
    } else if value.len() > 63 {
        causes.push(FieldCause::too_long(field, 63));
    } else if !is_dns_subdomain(&value.to_lowercase()) {
        causes.push(FieldCause::invalid(field, value, SUBDOMAIN_MSG));
    }
}

/// A pool name: at most 253 characters, DNS subdomains joined by `/`.
fn pool_name(causes: &mut Vec<FieldCause>, field: &str, value: &str) {
    if value.is_empty() {
        causes.push(FieldCause::required(field, ""));
    } else if value.len() > 253 {
        causes.push(FieldCause::too_long(field, 253));
    } else if !value.split('/').all(is_dns_subdomain) {
        causes.push(FieldCause::invalid(
            field,
            value,
            "a valid pool name must be one or more DNS subdomains separated by slashes",
        ));
    }
}

/// An attribute or capacity name: `<id>` or `<domain>/<id>`.
fn qualified_name(causes: &mut Vec<FieldCause>, field: &str, key: &str, need_domain: bool) {
    let (domain, id) = match key.split_once('/') {
        Some((domain, id)) => (Some(domain), id),
        None => (None, key),
    };
    if need_domain && domain.is_none() {
        causes.push(FieldCause::required(
            field,
            "a fully qualified name must be a domain and a name separated by a slash",
        ));
        return;
    }
    if id.is_empty() {
        causes.push(FieldCause::required(field, ""));
    } else if id.len() > 32 {
        causes.push(FieldCause::too_long(field, 32));
    } else if !is_c_identifier(id) {
        causes.push(FieldCause::invalid(field, id, C_IDENTIFIER_MSG));
    }
    if let Some(domain) = domain {
        driver_name(causes, field, domain);
    }
}

fn selectors(causes: &mut Vec<FieldCause>, field: &str, v: &Value) {
    let items = capped(causes, field, v, MAX_LIST);
    for (i, s) in items.iter().enumerate() {
        let at = format!("{field}[{i}].cel");
        if s["cel"].is_null() {
            causes.push(FieldCause::required(at, ""));
            continue;
        }
        let expression = text(&s["cel"]["expression"]);
        if expression.trim().is_empty() {
            causes.push(FieldCause::required(format!("{at}.expression"), ""));
        } else if expression.len() > MAX_EXPRESSION {
            causes.push(FieldCause::too_long(
                format!("{at}.expression"),
                MAX_EXPRESSION,
            ));
        }
    }
}

fn opaque(causes: &mut Vec<FieldCause>, field: &str, v: &Value) {
    if v.is_null() {
        causes.push(FieldCause::required(field, ""));
        return;
    }
    driver_name(causes, &format!("{field}.driver"), text(&v["driver"]));
    let at = format!("{field}.parameters");
    match &v["parameters"] {
        Value::Null => causes.push(FieldCause::required(at, "")),
        Value::Object(_) => {
            let size = v["parameters"].to_string().len();
            if size > MAX_EXPRESSION {
                causes.push(FieldCause::too_long(at, MAX_EXPRESSION));
            }
        }
        other => causes.push(FieldCause::invalid(
            at,
            &other.to_string(),
            "parameters must be a valid JSON object",
        )),
    }
}

/// The rules of a `DeviceClass`.
pub fn device_class(obj: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let spec = &obj["spec"];
    selectors(&mut causes, "spec.selectors", &spec["selectors"]);
    let config = capped(&mut causes, "spec.config", &spec["config"], MAX_LIST);
    for (i, c) in config.iter().enumerate() {
        opaque(
            &mut causes,
            &format!("spec.config[{i}].opaque"),
            &c["opaque"],
        );
    }
    causes.extend(features::extended_resource_name(obj));
    causes
}

fn mode_and_count(causes: &mut Vec<FieldCause>, field: &str, v: &Value) {
    let mode = text(&v["allocationMode"]);
    let count = v["count"].as_i64().unwrap_or(0);
    match mode {
        EXACT_COUNT if count <= 0 => causes.push(FieldCause::invalid(
            format!("{field}.count"),
            &count.to_string(),
            "must be greater than zero",
        )),
        ALL if count != 0 => causes.push(FieldCause::invalid(
            format!("{field}.count"),
            &count.to_string(),
            "must not be specified when allocationMode is 'All'",
        )),
        EXACT_COUNT | ALL => {}
        other => causes.push(FieldCause::not_supported(
            format!("{field}.allocationMode"),
            &format!("{other:?}"),
            &[ALL, EXACT_COUNT],
        )),
    }
}

fn class_name(causes: &mut Vec<FieldCause>, field: &str, name: &str) {
    if name.is_empty() {
        causes.push(FieldCause::required(field, ""));
    } else if !is_dns_subdomain(name) {
        causes.push(FieldCause::invalid(field, name, SUBDOMAIN_MSG));
    }
}

/// Checks the requests of a claim spec; returns the names a constraint or config may refer to
/// (`req` and `req/sub`).
fn requests(causes: &mut Vec<FieldCause>, field: &str, v: &Value) -> Vec<String> {
    let items = capped(causes, field, v, MAX_LIST);
    let mut names: Vec<String> = Vec::new();
    for (i, r) in items.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let name = text(&r["name"]);
        label(causes, &format!("{at}.name"), name);
        if names.iter().any(|n| n == name) {
            causes.push(duplicate(format!("{at}.name"), name));
        }
        names.push(name.to_owned());
        match (&r["exactly"], &r["firstAvailable"]) {
            (Value::Null, Value::Null) | (Value::Object(_), Value::Array(_)) => {
                causes.push(FieldCause::required(
                    at.clone(),
                    "exactly one of `exactly` or `firstAvailable` is required",
                ));
            }
            (exactly @ Value::Object(_), _) => {
                let ex = format!("{at}.exactly");
                class_name(
                    causes,
                    &format!("{ex}.deviceClassName"),
                    text(&exactly["deviceClassName"]),
                );
                selectors(causes, &format!("{ex}.selectors"), &exactly["selectors"]);
                mode_and_count(causes, &ex, exactly);
                features::tolerations(causes, &ex, exactly);
            }
            (_, subs) => {
                let fa = format!("{at}.firstAvailable");
                let subs = capped(causes, &fa, subs, MAX_SUBREQUESTS);
                if subs.is_empty() {
                    causes.push(FieldCause::required(fa.clone(), ""));
                }
                let mut sub_names: Vec<&str> = Vec::new();
                for (j, s) in subs.iter().enumerate() {
                    let sat = format!("{fa}[{j}]");
                    let sub = text(&s["name"]);
                    label(causes, &format!("{sat}.name"), sub);
                    if sub_names.contains(&sub) {
                        causes.push(duplicate(format!("{sat}.name"), sub));
                    }
                    sub_names.push(sub);
                    names.push(format!("{name}/{sub}"));
                    class_name(
                        causes,
                        &format!("{sat}.deviceClassName"),
                        text(&s["deviceClassName"]),
                    );
                    selectors(causes, &format!("{sat}.selectors"), &s["selectors"]);
                    mode_and_count(causes, &sat, s);
                    features::tolerations(causes, &sat, s);
                }
            }
        }
    }
    names
}

fn request_refs(causes: &mut Vec<FieldCause>, field: &str, v: &Value, known: &[String]) {
    for (i, r) in list(v).iter().enumerate() {
        let name = text(r);
        if !known.iter().any(|k| k == name) {
            causes.push(FieldCause::invalid(
                format!("{field}[{i}]"),
                name,
                "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
            ));
        }
    }
}

/// The rules of a claim spec at `field` (`spec` of a claim, `spec.spec` of a template).
pub fn claim_spec(field: &str, spec: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let devices = &spec["devices"];
    let at = format!("{field}.devices");
    let known = requests(&mut causes, &format!("{at}.requests"), &devices["requests"]);
    let constraints = capped(
        &mut causes,
        &format!("{at}.constraints"),
        &devices["constraints"],
        MAX_LIST,
    );
    for (i, c) in constraints.iter().enumerate() {
        let cat = format!("{at}.constraints[{i}]");
        request_refs(
            &mut causes,
            &format!("{cat}.requests"),
            &c["requests"],
            &known,
        );
        match (
            c["matchAttribute"].as_str(),
            c["distinctAttribute"].as_str(),
        ) {
            (Some(attribute), _) => {
                qualified_name(
                    &mut causes,
                    &format!("{cat}.matchAttribute"),
                    attribute,
                    true,
                );
            }
            (None, Some(attribute)) => {
                qualified_name(
                    &mut causes,
                    &format!("{cat}.distinctAttribute"),
                    attribute,
                    true,
                );
            }
            (None, None) => {
                causes.push(FieldCause::required(format!("{cat}.matchAttribute"), ""));
            }
        }
    }
    let config = capped(
        &mut causes,
        &format!("{at}.config"),
        &devices["config"],
        MAX_LIST,
    );
    for (i, c) in config.iter().enumerate() {
        let cat = format!("{at}.config[{i}]");
        request_refs(
            &mut causes,
            &format!("{cat}.requests"),
            &c["requests"],
            &known,
        );
        opaque(&mut causes, &format!("{cat}.opaque"), &c["opaque"]);
    }
    causes
}

/// The rules of a `ResourceSlice`.
pub fn resource_slice(obj: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let spec = &obj["spec"];
    driver_name(&mut causes, "spec.driver", text(&spec["driver"]));
    let pool = &spec["pool"];
    pool_name(&mut causes, "spec.pool.name", text(&pool["name"]));
    let generation = pool["generation"].as_i64().unwrap_or(0);
    if generation < 0 {
        causes.push(FieldCause::invalid(
            "spec.pool.generation",
            &generation.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    let count = pool["resourceSliceCount"].as_i64().unwrap_or(0);
    if count <= 0 {
        causes.push(FieldCause::invalid(
            "spec.pool.resourceSliceCount",
            &count.to_string(),
            "must be greater than zero",
        ));
    }
    let node_name = spec["nodeName"].as_str().filter(|n| !n.is_empty());
    let per_device = spec["perDeviceNodeSelection"].as_bool().unwrap_or(false);
    let set = [
        node_name.is_some(),
        !spec["nodeSelector"].is_null(),
        spec["allNodes"].as_bool().unwrap_or(false),
        per_device,
    ];
    match set.iter().filter(|s| **s).count() {
        0 => causes.push(FieldCause::required(
            "spec",
            "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
        )),
        1 => {}
        _ => causes.push(FieldCause::invalid(
            "spec",
            "{`nodeName`, `nodeSelector`, `allNodes`}",
            "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
        )),
    }
    if let Some(node) = node_name {
        if !is_dns_subdomain(node) {
            causes.push(FieldCause::invalid("spec.nodeName", node, SUBDOMAIN_MSG));
        }
    }
    if let Some(terms) = spec["nodeSelector"]["nodeSelectorTerms"].as_array() {
        if terms.len() != 1 {
            causes.push(FieldCause::invalid(
                "spec.nodeSelector.nodeSelectorTerms",
                &terms.len().to_string(),
                "must have exactly one node selector term",
            ));
        }
    }
    devices(&mut causes, &spec["devices"], per_device);
    features::shared_counters(&mut causes, spec);
    features::partitionable_limits(&mut causes, spec);
    causes
}

fn devices(causes: &mut Vec<FieldCause>, v: &Value, per_device: bool) {
    let items = capped(causes, "spec.devices", v, MAX_DEVICES);
    let mut names: Vec<&str> = Vec::new();
    for (i, d) in items.iter().enumerate() {
        let at = format!("spec.devices[{i}]");
        let name = text(&d["name"]);
        label(causes, &format!("{at}.name"), name);
        if names.contains(&name) {
            causes.push(duplicate(format!("{at}.name"), name));
        }
        names.push(name);
        let attributes = d["attributes"].as_object();
        let capacity = d["capacity"].as_object();
        let total =
            attributes.map_or(0, serde_json::Map::len) + capacity.map_or(0, serde_json::Map::len);
        if total > MAX_ATTRIBUTES {
            causes.push(FieldCause {
                reason: "FieldValueTooMany",
                field: at.clone(),
                message: format!(
                    "Too many: {total}: must have at most {MAX_ATTRIBUTES} attributes and capacities combined"
                ),
            });
        }
        for (key, value) in attributes.into_iter().flatten() {
            let field = format!("{at}.attributes[{key}]");
            qualified_name(causes, &field, key, false);
            attribute_value(causes, &field, value);
        }
        for key in capacity.into_iter().flatten().map(|(k, _)| k) {
            qualified_name(causes, &format!("{at}.capacity[{key}]"), key, false);
        }
        features::device(causes, &at, d, per_device);
    }
}

fn attribute_value(causes: &mut Vec<FieldCause>, field: &str, v: &Value) {
    let kinds = ["int", "bool", "string", "version"];
    let set: Vec<&str> = kinds.into_iter().filter(|k| !v[*k].is_null()).collect();
    match set.as_slice() {
        [] => causes.push(FieldCause::required(
            field,
            "exactly one value must be specified",
        )),
        ["string"] if text(&v["string"]).len() > MAX_ATTRIBUTE_VALUE => {
            causes.push(FieldCause::too_long(
                format!("{field}.string"),
                MAX_ATTRIBUTE_VALUE,
            ));
        }
        ["version"] => {
            let version = text(&v["version"]);
            if version.len() > MAX_ATTRIBUTE_VALUE {
                causes.push(FieldCause::too_long(
                    format!("{field}.version"),
                    MAX_ATTRIBUTE_VALUE,
                ));
            } else if semver::Version::parse(version).is_err() {
                causes.push(FieldCause::invalid(
                    format!("{field}.version"),
                    version,
                    "must be a string compatible with semver.org spec 2.0.0",
                ));
            }
        }
        [_] => {}
        _ => causes.push(FieldCause::invalid(
            field,
            &format!("{{{}}}", set.join(", ")),
            "exactly one value must be specified",
        )),
    }
}

/// The immutable fields of a `ResourceSlice` that an update changed.
pub fn resource_slice_update(old: &Value, new: &Value) -> Vec<FieldCause> {
    [
        ("/spec/driver", "spec.driver"),
        ("/spec/pool/name", "spec.pool.name"),
        ("/spec/nodeName", "spec.nodeName"),
    ]
    .into_iter()
    .filter(|(pointer, _)| old.pointer(pointer) != new.pointer(pointer))
    .map(|(_, field)| FieldCause::immutable(field))
    .collect()
}

fn uids(v: &Value) -> Vec<&str> {
    list(v).iter().map(|r| text(&r["uid"])).collect()
}

/// The rules of a claim's `status` (on every write) and of its change from `old` (on update).
pub fn claim_status(old: Option<&Value>, new: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let status = &new["status"];
    let allocation = status.get("allocation").filter(|a| !a.is_null());
    let reserved = capped(
        &mut causes,
        "status.reservedFor",
        &status["reservedFor"],
        MAX_RESERVED_FOR,
    );
    let new_uids = uids(&status["reservedFor"]);
    for (i, r) in reserved.iter().enumerate() {
        let at = format!("status.reservedFor[{i}]");
        for f in ["resource", "name", "uid"] {
            if text(&r[f]).is_empty() {
                causes.push(FieldCause::required(format!("{at}.{f}"), ""));
            }
        }
        let uid = new_uids[i];
        if !uid.is_empty() && new_uids[..i].contains(&uid) {
            causes.push(duplicate(at, uid));
        }
    }
    if !reserved.is_empty() && allocation.is_none() {
        causes.push(FieldCause::forbidden(
            "status.reservedFor",
            "may not be specified when `allocated` is not set",
        ));
    }
    if let Some(allocation) = allocation {
        allocation_causes(&mut causes, allocation);
    }
    device_status_causes(&mut causes, status, allocation);
    let Some(old) = old else { return causes };
    let old_status = &old["status"];
    let old_allocation = old_status.get("allocation").filter(|a| !a.is_null());
    if let (Some(o), Some(n)) = (old_allocation, allocation) {
        if o != n {
            causes.push(FieldCause::immutable("status.allocation"));
        }
    }
    if new["metadata"]["deletionTimestamp"].is_string() {
        let old_uids = uids(&old_status["reservedFor"]);
        if new_uids.iter().any(|u| !old_uids.contains(u)) {
            causes.push(FieldCause::forbidden(
                "status.reservedFor",
                "new entries may not be added while `deletionTimestamp` is set",
            ));
        }
    }
    causes
}

fn allocation_causes(causes: &mut Vec<FieldCause>, allocation: &Value) {
    let at = "status.allocation.devices";
    let results = capped(
        causes,
        &format!("{at}.results"),
        &allocation["devices"]["results"],
        MAX_RESULTS,
    );
    for (i, r) in results.iter().enumerate() {
        let rat = format!("{at}.results[{i}]");
        let request = text(&r["request"]);
        if request.is_empty() {
            causes.push(FieldCause::required(format!("{rat}.request"), ""));
        }
        driver_name(causes, &format!("{rat}.driver"), text(&r["driver"]));
        pool_name(causes, &format!("{rat}.pool"), text(&r["pool"]));
        label(causes, &format!("{rat}.device"), text(&r["device"]));
    }
    let config = capped(
        causes,
        &format!("{at}.config"),
        &allocation["devices"]["config"],
        MAX_ALLOCATION_CONFIG,
    );
    for (i, c) in config.iter().enumerate() {
        let cat = format!("{at}.config[{i}]");
        let source = text(&c["source"]);
        if !matches!(source, FROM_CLASS | FROM_CLAIM) {
            causes.push(FieldCause::not_supported(
                format!("{cat}.source"),
                &format!("{source:?}"),
                &[FROM_CLAIM, FROM_CLASS],
            ));
        }
        opaque(causes, &format!("{cat}.opaque"), &c["opaque"]);
    }
}

fn device_status_causes(causes: &mut Vec<FieldCause>, status: &Value, allocation: Option<&Value>) {
    let allocated: Vec<(&str, &str, &str)> = allocation
        .map(|a| list(&a["devices"]["results"]))
        .unwrap_or_default()
        .iter()
        .map(|r| (text(&r["driver"]), text(&r["pool"]), text(&r["device"])))
        .collect();
    let mut seen: Vec<(&str, &str, &str)> = Vec::new();
    for (i, d) in list(&status["devices"]).iter().enumerate() {
        let key = (text(&d["driver"]), text(&d["pool"]), text(&d["device"]));
        let at = format!("status.devices[{i}]");
        device_status::names(causes, &at, d);
        if !allocated.contains(&key) {
            causes.push(FieldCause::invalid(
                at.clone(),
                &format!("{}/{}/{}", key.0, key.1, key.2),
                "must be an allocated device in the claim",
            ));
        }
        device_status::contents(causes, &at, d);
        if seen.contains(&key) {
            causes.push(duplicate(at, &format!("{}/{}/{}", key.0, key.1, key.2)));
        }
        seen.push(key);
    }
}

mod device_status;

#[cfg(test)]
mod tests;
