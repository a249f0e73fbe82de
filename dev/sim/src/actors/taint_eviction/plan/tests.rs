//! The eviction decision and the rule condition on hand-made pods, claims, slices and rules.

// The fixture builders take the JSON their callers write inline.
#![allow(clippy::needless_pass_by_value)]

use std::sync::Arc;

use chrono::TimeZone;
use serde_json::{json, Value};

use super::*;

const DRIVER: &str = "gpu.example.com";

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + seconds, 0).unwrap()
}

fn stamp(seconds: i64) -> String {
    at(seconds).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Pod `p` (uid `pod-uid`) on node-0 using claim `c`, in phase `phase`.
fn pod(phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
        "spec": {"nodeName": "node-0", "containers": [],
            "resourceClaims": [{"name": "gpu", "source": {"resourceClaimName": "c"}}]},
        "status": {"phase": phase},
    }))
    .unwrap()
}

/// Claim `c` with gpu-0 of pool node-0, reserved for `p`, the result tolerating `tolerations`.
fn claim(tolerations: Value) -> Arc<ResourceClaim> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "claim-uid"},
            "spec": {"devices": {"requests": []}},
            "status": {
                "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER,
                    "pool": "node-0", "device": "gpu-0", "tolerations": tolerations}]}},
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}],
            },
        }))
        .unwrap(),
    )
}

fn slice(taints: Value) -> Arc<ResourceSlice> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "s"},
            "spec": {"driver": DRIVER, "nodeName": "node-0",
                "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "taints": taints}, {"name": "gpu-1"}]},
        }))
        .unwrap(),
    )
}

fn no_execute(seconds: i64) -> Value {
    json!([{"key": "example.com/unhealthy", "value": "true", "effect": "NoExecute",
        "timeAdded": stamp(seconds)}])
}

fn rule(effect: &str, seconds: i64) -> Arc<DeviceTaintRule> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "r", "uid": "rule-uid"},
            "spec": {"deviceSelector": {"driver": DRIVER},
                "taint": {"key": "example.com/unhealthy", "value": "true", "effect": effect,
                    "timeAdded": stamp(seconds)}},
        }))
        .unwrap(),
    )
}

fn decide(
    pod: &Pod,
    claim: &Arc<ResourceClaim>,
    slices: &[Arc<ResourceSlice>],
    rules: &[Arc<DeviceTaintRule>],
) -> Option<Eviction> {
    let lookup = |name: &str| (name == "c").then(|| Arc::clone(claim));
    let published = PublishedTaints::of(slices);
    pod_eviction(
        pod,
        &View {
            claim: &lookup,
            published: &published,
            rules,
            now: at(1000),
        },
    )
}

#[test]
fn a_pod_using_a_device_with_an_untolerated_no_execute_taint_is_evicted_at_its_time() {
    let eviction = decide(
        &pod("Running"),
        &claim(json!([])),
        &[slice(no_execute(5))],
        &[],
    );
    assert_eq!(
        eviction,
        Some(Eviction {
            when: at(5),
            rules: BTreeSet::new()
        })
    );
}

#[test]
fn an_untainted_device_a_no_schedule_taint_or_a_tolerating_result_keeps_the_pod() {
    let running = pod("Running");
    assert_eq!(
        decide(&running, &claim(json!([])), &[slice(json!([]))], &[]),
        None
    );
    let no_schedule = json!([{"key": "k", "effect": "NoSchedule"}]);
    assert_eq!(
        decide(&running, &claim(json!([])), &[slice(no_schedule)], &[]),
        None
    );
    let forever =
        json!([{"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoExecute"}]);
    assert_eq!(
        decide(&running, &claim(forever), &[slice(no_execute(5))], &[]),
        None
    );
}

#[test]
fn toleration_seconds_delay_the_eviction_from_the_time_the_taint_was_added() {
    let for_300s = json!([{"key": "example.com/unhealthy", "value": "true", "effect": "NoExecute",
        "tolerationSeconds": 300}]);
    let eviction = decide(
        &pod("Running"),
        &claim(for_300s),
        &[],
        &[rule("NoExecute", 10)],
    )
    .unwrap();
    assert_eq!(eviction.when, at(310));
    assert_eq!(eviction.rules, BTreeSet::from(["rule-uid".to_owned()]));
}

#[test]
fn only_scheduled_live_pods_the_claim_is_reserved_for_are_evicted() {
    let rules = [rule("NoExecute", 0)];
    let unscheduled: Pod = {
        let mut pod = pod("Pending");
        pod.spec.as_mut().unwrap().node_name = None;
        pod
    };
    assert_eq!(decide(&unscheduled, &claim(json!([])), &[], &rules), None);
    assert_eq!(
        decide(&pod("Succeeded"), &claim(json!([])), &[], &rules),
        None
    );
    let mut other = (*claim(json!([]))).clone();
    other.status.as_mut().unwrap().reserved_for.clear();
    assert_eq!(decide(&pod("Running"), &Arc::new(other), &[], &rules), None);
    assert!(decide(&pod("Running"), &claim(json!([])), &[], &rules).is_some());
    assert_eq!(
        decide(
            &pod("Running"),
            &claim(json!([])),
            &[],
            &[rule("NoSchedule", 0)]
        ),
        None
    );
}

#[test]
fn only_the_newest_generation_of_a_pool_counts() {
    let mut old = (*slice(no_execute(0))).clone();
    old.metadata.name = Some("old".into());
    let newer = {
        let mut s = (*slice(json!([]))).clone();
        s.spec.pool.generation = 2;
        Arc::new(s)
    };
    assert_eq!(
        decide(
            &pod("Running"),
            &claim(json!([])),
            &[Arc::new(old), newer],
            &[]
        ),
        None
    );
}

#[test]
fn the_rule_condition_reads_as_upstream_writes_it() {
    let counts = |pending, evicted| RuleCounts {
        pending,
        evicted,
        devices: (0, 0),
    };
    let pending = rule_condition("NoExecute", &counts((1, 1), 1));
    assert_eq!(
        (pending.status, pending.reason),
        ("True", "PodsPendingEviction")
    );
    assert_eq!(
        pending.message,
        "1 pod needs to be evicted in 1 namespace. 1 pod evicted since starting the controller."
    );
    let done = rule_condition("NoExecute", &counts((0, 0), 2));
    assert_eq!((done.status, done.reason), ("False", "Completed"));
    assert_eq!(
        done.message,
        "2 pods evicted since starting the controller."
    );
    let idle = rule_condition("NoExecute", &counts((0, 0), 0));
    assert_eq!((idle.reason, idle.message.as_str()), ("NotStarted", ""));
    let many = rule_condition("NoExecute", &counts((3, 2), 0));
    assert_eq!(
        many.message,
        "3 pods need to be evicted in 2 different namespaces."
    );
    let other = rule_condition("NoSchedule", &counts((0, 0), 0));
    assert_eq!(
        (other.status, other.reason, other.message.as_str()),
        (
            "False",
            "OtherEffect",
            "Eviction only happens for the NoExecute effect."
        )
    );
    let none = rule_condition(
        "None",
        &RuleCounts {
            pending: (1, 1),
            evicted: 0,
            devices: (2, 1),
        },
    );
    assert_eq!(none.reason, "NoEffect");
    assert!(none.message.starts_with("2 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace if the effect was NoExecute."), "{}", none.message);
}

#[test]
fn a_rule_counts_the_published_and_allocated_devices_it_selects() {
    let published = PublishedTaints::of(&[slice(json!([]))]);
    assert_eq!(
        selected_devices(&rule("None", 0), &published, &[claim(json!([]))]),
        (2, 1)
    );
}
