//! Defaulting as the API server's defaulting functions and built-in admission do it: on create
//! (pod spec defaults and initial status, namespace finalizers and phase) and on every decode
//! (the claim request defaults of `resource.k8s.io`, v1alpha2 and v1).
//!
//! Pure functions over `serde_json::Value`; no store or HTTP dependencies.

use serde_json::{json, Map, Value};

use super::resources::ResourceInfo;

fn set_default(obj: &mut Map<String, Value>, key: &str, value: Value) {
    if obj.get(key).is_none_or(Value::is_null) {
        obj.insert(key.to_string(), value);
    }
}

/// Applies defaults to a new object of `info` (in place). `status` handling for kinds with a status
/// subresource happens in the create handler; this sets what the kind's create strategy sets.
pub fn apply_create_defaults(info: &ResourceInfo, obj: &mut Value) {
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Pod") => default_pod(obj),
        ("", "Namespace") => {
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if let Some(meta) = obj["metadata"].as_object_mut() {
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
                }
            }
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
        }
        _ => {}
    }
}

/// Applies the defaults that the API server's decoding sets on every write (create, update and
/// patch alike: Kubernetes' `SetDefaults_*` functions), so that an update leaving a defaulted
/// field out keeps its default instead of clearing it.
pub fn apply_decode_defaults(info: &ResourceInfo, obj: &mut Value) {
    match (info.group.as_str(), info.kind.as_str()) {
        _ if super::resource_v1::handles(info) => super::resource_v1::apply_defaults(info, obj),
        ("resource.k8s.io", "ResourceClaim") => default_claim_spec(&mut obj["spec"]),
        ("resource.k8s.io", "ResourceClaimTemplate") => {
            default_claim_spec(&mut obj["spec"]["spec"]);
        }
        _ => {}
    }
}

fn default_claim_spec(spec: &mut Value) {
    if let Some(spec) = spec.as_object_mut() {
        set_default(spec, "allocationMode", json!("WaitForFirstConsumer"));
    }
}

/// A container's limits without a request give their request (`SetDefaults_Pod` of
/// `pkg/apis/core/v1/defaults.go`), so that a pod limiting `example.com/gpu` also requests it.
fn requests_from_limits(container: &mut Map<String, Value>) {
    let Some(resources) = container
        .get_mut("resources")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let requests = resources.entry("requests").or_insert_with(|| json!({}));
    if let Some(requests) = requests.as_object_mut() {
        for (name, value) in limits {
            requests.entry(name).or_insert(value);
        }
    }
}

fn default_pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "enableServiceLinks", json!(true));
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    set_default(spec, "priority", json!(0));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
                let latest = !image.contains(':') || image.ends_with(":latest");
                set_default(
                    c,
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                );
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                set_default(c, "resources", json!({}));
                requests_from_limits(c);
            }
        }
    }
    let qos = pod_qos(spec);
    obj["status"] = json!({"phase": "Pending", "qosClass": qos});
}

/// The quality-of-service class of a pod spec: `Guaranteed` when every container limits cpu and memory with equal
/// requests, `BestEffort` when none requests or limits anything, `Burstable` otherwise.
fn pod_qos(spec: &Map<String, Value>) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| spec.get(*l).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in containers {
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        if limits.is_some_and(|l| !l.is_empty()) || requests.is_some_and(|r| !r.is_empty()) {
            any = true;
        }
        for res in ["cpu", "memory"] {
            let limit = limits.and_then(|l| l.get(res));
            let request = requests.and_then(|r| r.get(res)).or(limit);
            if limit.is_none() || request != limit {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}
