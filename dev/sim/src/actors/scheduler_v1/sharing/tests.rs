//! The share arithmetic on hand-written devices: rounding under each kind of request policy,
//! the policies' refusals, and the canonical text of amounts.

// The fixture builders take the JSON their callers write inline.
#![allow(clippy::needless_pass_by_value)]

use serde_json::{json, Value};

use super::*;

fn device(capacity: Value) -> Device {
    serde_json::from_value(json!({"name": "gpu-0", "allowMultipleAllocations": true,
        "capacity": capacity}))
    .unwrap()
}

fn requests(requests: Value) -> CapacityRequirements {
    serde_json::from_value(json!({ "requests": requests })).unwrap()
}

/// What one allocation asking `asked` consumes of the single capacity `memory`.
fn memory(policy: Value, asked: Option<&str>) -> Option<String> {
    let gpu = device(json!({"memory": {"value": "80Gi", "requestPolicy": policy}}));
    let asked = asked.map(|a| requests(json!({ "memory": a })));
    let consumed = consumption(asked.as_ref(), &gpu)?;
    Some(consumed[0].written.0.clone())
}

#[test]
fn a_valid_range_rounds_up_to_its_steps_from_min_and_refuses_above_max() {
    let policy =
        json!({"default": "8Gi", "validRange": {"min": "8Gi", "max": "64Gi", "step": "8Gi"}});
    let at = |asked| memory(policy.clone(), asked);
    assert_eq!(at(Some("9Gi")).as_deref(), Some("16Gi"));
    assert_eq!(at(Some("16Gi")).as_deref(), Some("16Gi"));
    assert_eq!(at(Some("1")).as_deref(), Some("8Gi"), "below min");
    assert_eq!(at(None).as_deref(), Some("8Gi"), "the default");
    assert_eq!(at(Some("65Gi")), None, "above max");
    let no_step = json!({"default": "1Gi", "validRange": {"min": "1Gi"}});
    assert_eq!(
        memory(no_step, Some("1500Mi")).as_deref(),
        Some("1500Mi"),
        "without a step the amount stands"
    );
}

#[test]
fn valid_values_round_up_to_the_next_value_and_refuse_above_the_last() {
    let policy = json!({"default": "10Gi", "validValues": ["10Gi", "20Gi", "40Gi"]});
    let at = |asked| memory(policy.clone(), asked);
    assert_eq!(at(Some("11Gi")).as_deref(), Some("20Gi"));
    assert_eq!(at(Some("40Gi")).as_deref(), Some("40Gi"));
    assert_eq!(at(Some("41Gi")), None);
}

#[test]
fn without_a_policy_the_amount_asked_or_else_the_whole_capacity_is_consumed() {
    let gpu = device(json!({"memory": {"value": "80Gi"}}));
    let whole = consumption(None, &gpu).unwrap();
    assert_eq!(whole[0].written.0, "80Gi");
    let asked = requests(json!({"memory": "40960Mi"}));
    let part = consumption(Some(&asked), &gpu).unwrap();
    assert_eq!(part[0].written.0, "40Gi", "written canonically");
    assert!(consumption(Some(&requests(json!({"cores": "1"}))), &gpu).is_none());
}

#[test]
fn capacity_fits_while_the_shares_held_leave_room() {
    let gpu = device(json!({"memory": {"value": "80Gi"}}));
    let asked = requests(json!({"memory": "40Gi"}));
    let share = consumption(Some(&asked), &gpu).unwrap();
    let held =
        |amount: &str| Amounts::from([("memory".to_owned(), Quantity::parse(amount).unwrap())]);
    assert!(fits_capacity(&share, &gpu, &Amounts::new()));
    assert!(fits_capacity(&share, &gpu, &held("40Gi")));
    assert!(!fits_capacity(&share, &gpu, &held("41Gi")));
}

#[test]
fn amounts_are_written_with_the_largest_suffix_of_their_format() {
    let q = |text: &str| Quantity::parse(text).unwrap();
    assert_eq!(canonical(q("1024Mi"), true), "1Gi");
    assert_eq!(canonical(q("1500"), true), "1500");
    assert_eq!(canonical(q("2000"), false), "2k");
    assert_eq!(canonical(q("0.5"), false), "500m");
    assert_eq!(canonical(q("0"), false), "0");
}
