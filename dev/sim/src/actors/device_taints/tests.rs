//! The toleration matching, the taints in force on a device and the eviction times, against
//! upstream's rules (`devicetoleration_test.go`, the allocator's and the eviction
//! controller's tests).

// The fixture builders take the JSON their callers write inline.
#![allow(clippy::needless_pass_by_value)]

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use dra_types::resource_v1::NO_SCHEDULE;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;

fn taint(key: &str, value: Option<&str>, effect: &str) -> DeviceTaint {
    DeviceTaint {
        key: key.to_owned(),
        value: value.map(str::to_owned),
        effect: effect.to_owned(),
        time_added: Some(Time(at(0))),
    }
}

fn toleration(value: serde_json::Value) -> DeviceToleration {
    serde_json::from_value(value).unwrap()
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + seconds, 0).unwrap()
}

fn rule(selector: serde_json::Value, effect: &str) -> Arc<DeviceTaintRule> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "r"},
            "spec": {"deviceSelector": selector,
                "taint": {"key": "example.com/rule", "effect": effect}},
        }))
        .unwrap(),
    )
}

#[test]
fn a_toleration_matches_by_key_operator_value_and_effect_as_upstream() {
    let broken = taint("example.com/broken", Some("true"), NO_SCHEDULE);
    let cases = [
        (json!({"key": "example.com/broken", "value": "true"}), true),
        (
            json!({"key": "example.com/broken", "operator": "Equal", "value": "true"}),
            true,
        ),
        (
            json!({"key": "example.com/broken", "operator": "Equal", "value": "false"}),
            false,
        ),
        (json!({"key": "example.com/broken"}), false),
        (
            json!({"key": "example.com/broken", "operator": "Exists"}),
            true,
        ),
        (json!({"operator": "Exists"}), true),
        (
            json!({"key": "example.com/other", "operator": "Exists"}),
            false,
        ),
        (json!({"operator": "Exists", "effect": "NoSchedule"}), true),
        (json!({"operator": "Exists", "effect": "NoExecute"}), false),
        (
            json!({"key": "example.com/broken", "operator": "Lt", "value": "true"}),
            false,
        ),
    ];
    for (value, expected) in cases {
        assert_eq!(
            tolerates(&toleration(value.clone()), &broken),
            expected,
            "{value}"
        );
    }
    let no_value = taint("example.com/broken", None, NO_SCHEDULE);
    assert!(tolerates(
        &toleration(json!({"key": "example.com/broken"})),
        &no_value
    ));
}

#[test]
fn only_untolerated_no_schedule_and_no_execute_taints_prevent_allocation() {
    let none = taint("k", None, "None");
    let no_schedule = taint("k", None, NO_SCHEDULE);
    let no_execute = taint("k", None, NO_EXECUTE);
    assert!(!prevents_allocation([&none], &[]), "None does not block");
    assert!(prevents_allocation([&no_schedule], &[]));
    assert!(prevents_allocation([&no_execute], &[]));
    let tolerate_schedule =
        toleration(json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"}));
    assert!(!prevents_allocation(
        [&no_schedule],
        std::slice::from_ref(&tolerate_schedule)
    ));
    assert!(
        prevents_allocation([&no_schedule, &no_execute], &[tolerate_schedule]),
        "every taint must be tolerated"
    );
    assert!(!prevents_allocation(
        [&no_schedule, &no_execute],
        &[toleration(json!({"operator": "Exists"}))]
    ));
}

#[test]
fn a_rule_selects_by_every_criterion_it_sets_and_without_selector_selects_nothing() {
    let view_of = |rule: Arc<DeviceTaintRule>| {
        let rules = [rule];
        TaintView { rules: &rules }
            .taints_of(("drv", "pool-a", "gpu-0"), &[])
            .count()
    };
    assert_eq!(view_of(rule(json!({"driver": "drv"}), NO_SCHEDULE)), 1);
    assert_eq!(
        view_of(rule(
            json!({"driver": "drv", "pool": "pool-a"}),
            NO_SCHEDULE
        )),
        1
    );
    assert_eq!(
        view_of(rule(
            json!({"driver": "drv", "pool": "pool-b"}),
            NO_SCHEDULE
        )),
        0
    );
    assert_eq!(view_of(rule(json!({"device": "gpu-1"}), NO_SCHEDULE)), 0);
    assert_eq!(
        view_of(rule(json!({}), NO_SCHEDULE)),
        1,
        "an empty selector selects all"
    );
    assert_eq!(view_of(rule(serde_json::Value::Null, NO_SCHEDULE)), 0);
}

#[test]
fn a_device_carries_its_own_taints_then_those_of_the_rules() {
    let own = [taint("example.com/own", None, "None")];
    let rules = [rule(json!({"driver": "drv"}), NO_EXECUTE)];
    let keys: Vec<&str> = TaintView { rules: &rules }
        .taints_of(("drv", "p", "d"), &own)
        .map(|t| t.key.as_str())
        .collect();
    assert_eq!(keys, ["example.com/own", "example.com/rule"]);
}

#[test]
fn eviction_is_at_time_added_unless_a_no_execute_toleration_delays_or_prevents_it() {
    let no_execute = taint("k", Some("v"), NO_EXECUTE);
    let now = at(99);
    assert_eq!(eviction_time(&no_execute, &[], now), Some(at(0)));
    assert_eq!(
        eviction_time(&taint("k", None, NO_SCHEDULE), &[], now),
        None
    );
    assert_eq!(eviction_time(&taint("k", None, "None"), &[], now), None);
    let forever = toleration(json!({"key": "k", "value": "v", "effect": "NoExecute"}));
    assert_eq!(
        eviction_time(&no_execute, std::slice::from_ref(&forever), now),
        None
    );
    let five_minutes = toleration(
        json!({"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 300}),
    );
    let one_minute = toleration(
        json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}),
    );
    assert_eq!(
        eviction_time(&no_execute, std::slice::from_ref(&five_minutes), now),
        Some(at(300))
    );
    assert_eq!(
        eviction_time(&no_execute, &[five_minutes.clone(), one_minute], now),
        Some(at(60)),
        "the smallest tolerationSeconds wins"
    );
    assert_eq!(
        eviction_time(&no_execute, &[five_minutes, forever], now),
        None
    );
    let negative =
        toleration(json!({"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -5}));
    assert_eq!(eviction_time(&no_execute, &[negative], now), Some(at(0)));
    let any_effect = toleration(json!({"operator": "Exists"}));
    assert_eq!(
        eviction_time(&no_execute, &[any_effect], now),
        Some(at(0)),
        "upstream counts only tolerations naming NoExecute"
    );
    let unstamped = DeviceTaint {
        time_added: None,
        ..no_execute
    };
    assert_eq!(eviction_time(&unstamped, &[], now), Some(now));
}
