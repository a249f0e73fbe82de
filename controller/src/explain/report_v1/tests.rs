//! The report of `dra-ledger explain pod` on v1: allocated claims, the tainted devices named as
//! the reason a pod waits (unhealthy, cordoned, other taints, from slices and rules, tolerated
//! or not), and the kubelet's device health of a running pod.

use super::*;
use serde_json::{json, Value};

const DRIVER: &str = "gpu.dra-ledger.io";

fn pod(node: Option<&str>, phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": [{"name": "c"}], "nodeName": node,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}]},
        "status": {"phase": phase}
    }))
    .unwrap()
}

fn claim(tolerations: &Value, allocated_on: Option<&str>) -> ResourceClaim {
    let mut claim = json!({
        "metadata": {"name": "c1", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "r",
            "exactly": {"deviceClassName": "gpu", "tolerations": tolerations}}]}}
    });
    if let Some(pool) = allocated_on {
        claim["status"] = json!({
            "allocation": {"devices": {"results": [
                {"request": "r", "driver": DRIVER, "pool": pool, "device": "gpu-0"}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]
        });
    }
    serde_json::from_value(claim).unwrap()
}

fn slice(node: &str, devices: &Value) -> ResourceSlice {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{node}-slice")},
        "spec": {"driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}
    }))
    .unwrap()
}

fn facts(pod: Pod, claim: ResourceClaim, slices: Vec<ResourceSlice>) -> V1Facts {
    let class: DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]}
    }))
    .unwrap();
    V1Facts {
        pod,
        claims: vec![PodClaimFacts {
            pod_claim: "gpu".into(),
            claim_name: Some("c1".into()),
            from_template: false,
            claim: Some(claim),
        }],
        health: Vec::new(),
        slices,
        rules: Vec::new(),
        classes: vec![class],
        events: vec![EventLine {
            time: None,
            kind: "Pod".into(),
            object: "p".into(),
            type_: "Warning".into(),
            reason: "FailedScheduling".into(),
            note: "0/2 nodes are available: 2 cannot allocate all claims".into(),
            from: "default-scheduler".into(),
        }],
    }
}

fn unhealthy_device() -> Value {
    json!([{"name": "gpu-1", "taints": [{"key": format!("{DRIVER}/unhealthy"),
        "value": "XidCritical", "effect": "NoSchedule", "timeAdded": "2026-12-07T10:00:00Z"}]}])
}

fn why(report: &str) -> &str {
    report
        .lines()
        .find(|l| l.starts_with("why: "))
        .unwrap_or_default()
}

#[test]
fn a_waiting_claim_names_the_unhealthy_device_with_reason_since_and_taint() {
    let facts = facts(
        pod(None, "Pending"),
        claim(&json!([]), None),
        vec![slice("node-a", &unhealthy_device())],
    );
    let text = report_v1(&facts, DRIVER);
    assert!(
        text.contains("claim c1 (pod claim gpu): not allocated (class gpu)"),
        "{text}"
    );
    assert!(
        why(&text).contains(
            "gpu-1 on node-a is unhealthy (XidCritical since 2026-12-07T10:00:00+00:00): \
             taint gpu.dra-ledger.io/unhealthy:NoSchedule"
        ),
        "{text}"
    );
    assert!(
        why(&text).contains("the scheduler waits: 0/2 nodes are available"),
        "{text}"
    );
}

#[test]
fn a_tolerated_taint_and_a_none_taint_are_not_named_and_the_scheduler_has_the_word() {
    let tolerating = json!([{"key": format!("{DRIVER}/unhealthy"), "operator": "Exists"}]);
    let devices = json!([{"name": "gpu-2", "taints": [{"key": "x", "effect": "None"}]}]);
    let mut slices = vec![slice("node-a", &unhealthy_device())];
    slices.push(slice("node-b", &devices));
    let text = report_v1(
        &facts(pod(None, "Pending"), claim(&tolerating, None), slices),
        DRIVER,
    );
    assert_eq!(
        why(&text),
        "why: the scheduler waits: 0/2 nodes are available: 2 cannot allocate all claims"
    );
}

#[test]
fn a_cordon_rule_and_another_taint_name_their_devices_and_the_rule() {
    let devices = json!([{"name": "gpu-3", "taints": [
        {"key": "example.com/maintenance", "value": "bios", "effect": "NoExecute"}]}]);
    let mut facts = facts(
        pod(None, "Pending"),
        claim(&json!([]), None),
        vec![slice("node-b", &devices)],
    );
    facts.rules.push(
        serde_json::from_value(json!({"metadata": {"name": "cordon.node-b.gpu-3"},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": "node-b", "device": "gpu-3"},
                "taint": {"key": format!("{DRIVER}/cordoned"), "effect": "NoSchedule"}}}))
        .unwrap(),
    );
    let why = why(&report_v1(&facts, DRIVER)).to_owned();
    assert!(
        why.contains("gpu-3 on node-b is tainted: taint example.com/maintenance=bios:NoExecute"),
        "{why}"
    );
    assert!(
        why.contains(
            "gpu-3 on node-b is cordoned: taint gpu.dra-ledger.io/cordoned:NoSchedule \
             (DeviceTaintRule cordon.node-b.gpu-3)"
        ),
        "{why}"
    );
}

#[test]
fn a_claim_of_another_drivers_class_names_no_device_of_ours() {
    let mut facts = facts(
        pod(None, "Pending"),
        claim(&json!([]), None),
        vec![slice("node-a", &unhealthy_device())],
    );
    facts.classes.clear();
    assert!(!why(&report_v1(&facts, DRIVER)).contains("gpu-1"));
}

#[test]
fn the_ledgers_not_allocated_event_on_the_claim_is_quoted() {
    let mut facts = facts(pod(None, "Pending"), claim(&json!([]), None), Vec::new());
    facts.events.push(EventLine {
        time: None,
        kind: "ResourceClaim".into(),
        object: "c1".into(),
        type_: "Warning".into(),
        reason: "NotAllocated".into(),
        note: "all 2 devices are allocated".into(),
        from: "dra-ledger".into(),
    });
    assert!(why(&report_v1(&facts, DRIVER))
        .contains("claim c1 is not allocated; NotAllocated says: all 2 devices are allocated"));
}

#[test]
fn a_running_pod_shows_its_allocation_and_the_unhealthy_device_the_kubelet_reports() {
    let served = json!({"status": {"containerStatuses": [{"name": "c",
        "allocatedResourcesStatus": [{"name": "claim:gpu", "resources": [
            {"resourceID": "gpu.dra-ledger.io/node-a/gpu-0", "health": "Unhealthy",
             "message": "XidCritical"}]}]}]}});
    let mut facts = facts(
        pod(Some("node-a"), "Running"),
        claim(&json!([]), Some("node-a")),
        Vec::new(),
    );
    facts.health = DeviceHealthLine::of_pod(&served);
    let text = report_v1(&facts, DRIVER);
    assert!(text.starts_with("pod ns/p: Running on node-a\n"), "{text}");
    assert!(
        text.contains("claim c1 (pod claim gpu): allocated on node-a: gpu-0; reserved for p"),
        "{text}"
    );
    assert!(
        text.contains("device gpu.dra-ledger.io/node-a/gpu-0 (claim:gpu, container c): Unhealthy: XidCritical"),
        "{text}"
    );
    assert!(
        text.contains(
            "health: the kubelet reports device gpu.dra-ledger.io/node-a/gpu-0 unhealthy"
        ),
        "{text}"
    );
    assert!(!text.contains("why:"), "{text}");
}

#[test]
fn the_extended_resource_claim_and_a_missing_claim_get_their_lines() {
    let mut facts = facts(pod(None, "Pending"), claim(&json!([]), None), Vec::new());
    facts.claims[0].claim = None;
    facts.claims.push(PodClaimFacts {
        pod_claim: super::super::EXTENDED_POD_CLAIM.into(),
        claim_name: Some("p-extended-resources-x".into()),
        from_template: false,
        claim: Some(claim(&json!([]), Some("node-a"))),
    });
    let text = report_v1(&facts, DRIVER);
    assert!(
        text.contains("claim c1 (pod claim gpu): does not exist"),
        "{text}"
    );
    assert!(
        text.contains("claim p-extended-resources-x (pod claim extended resources): allocated on node-a: gpu-0"),
        "{text}"
    );
    assert!(
        why(&text).contains("ResourceClaim ns/c1 does not exist"),
        "{text}"
    );
}

#[test]
fn the_served_pods_claims_are_read_named_from_a_template_and_extended() {
    let served = json!({
        "spec": {"resourceClaims": [
            {"name": "gpu", "resourceClaimName": "c1"},
            {"name": "t", "resourceClaimTemplateName": "tpl"},
            {"name": "u", "resourceClaimTemplateName": "tpl"}]},
        "status": {"resourceClaimStatuses": [{"name": "t", "resourceClaimName": "p-t-abc"}],
            "extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-x"}}
    });
    assert_eq!(
        super::super::v1::pod_claims(&served),
        vec![
            ("gpu".to_owned(), Some("c1".to_owned()), false),
            ("t".to_owned(), Some("p-t-abc".to_owned()), true),
            ("u".to_owned(), None, true),
            (
                "extended resources".to_owned(),
                Some("p-extended-resources-x".to_owned()),
                false
            ),
        ]
    );
}
