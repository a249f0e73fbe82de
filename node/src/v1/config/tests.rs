use serde_json::json;

use super::*;
use dra_types::resource_v1::{DeviceAllocationConfiguration, OpaqueDeviceConfiguration};

const DRIVER: &str = "gpu.dra-ledger.io";
const PATH: &str = "p";

fn shared(max_consumers: u32) -> Sharing {
    Sharing::Shared { max_consumers }
}

fn params(sharing: &Value) -> Value {
    json!({"apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "sharing": sharing})
}

fn entry(
    source: &str,
    requests: &[&str],
    driver: &str,
    parameters: Value,
) -> DeviceAllocationConfiguration {
    DeviceAllocationConfiguration {
        source: source.into(),
        requests: requests.iter().map(|r| (*r).to_owned()).collect(),
        opaque: Some(OpaqueDeviceConfiguration {
            driver: driver.into(),
            parameters,
        }),
    }
}

/// An entry of ours from `source` for `requests` sharing each device among `max` claims.
fn shared_entry(source: &str, requests: &[&str], max: u32) -> DeviceAllocationConfiguration {
    let sharing = json!({"mode": "Shared", "maxConsumers": max});
    entry(source, requests, DRIVER, params(&sharing))
}

fn allocation(config: Vec<DeviceAllocationConfiguration>) -> DeviceAllocationResult {
    DeviceAllocationResult {
        results: Vec::new(),
        config,
    }
}

fn error(parameters: &Value) -> ConfigError {
    parse_parameters(parameters, PATH).unwrap_err()
}

#[test]
fn parameters_give_their_sharing_and_no_sharing_is_exclusive() {
    let exclusive = params(&json!({"mode": "Exclusive"}));
    assert_eq!(
        parse_parameters(&exclusive, PATH).unwrap().sharing,
        Sharing::Exclusive
    );
    let four = params(&json!({"mode": "Shared", "maxConsumers": 4}));
    assert_eq!(parse_parameters(&four, PATH).unwrap().sharing, shared(4));
    let bare = json!({"apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND});
    assert_eq!(
        parse_parameters(&bare, PATH).unwrap().sharing,
        Sharing::Exclusive
    );
}

#[test]
fn every_wrong_field_is_named_with_its_path() {
    let cases = [
        (json!([1]), "p: must be a JSON object"),
        (
            json!({"kind": CONFIG_KIND}),
            "p.apiVersion: required, must be dra-ledger.io/v1alpha1",
        ),
        (
            json!({"apiVersion": "gpu.example.com/v1", "kind": CONFIG_KIND}),
            "p.apiVersion: \"gpu.example.com/v1\" is not dra-ledger.io/v1alpha1",
        ),
        (
            json!({"apiVersion": CONFIG_API_VERSION, "kind": "GpuConfig"}),
            "p.kind: \"GpuConfig\" is not DeviceConfig",
        ),
        (
            json!({"apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "timeSlicing": {}}),
            "p.timeSlicing: unknown field (known: apiVersion, kind, sharing)",
        ),
        (
            params(&json!("Shared")),
            "p.sharing: must be an object with mode and maxConsumers",
        ),
        (
            params(&json!({"maxConsumers": 2})),
            "p.sharing.mode: required, must be Exclusive or Shared",
        ),
        (
            params(&json!({"mode": "TimeSlicing"})),
            "p.sharing.mode: \"TimeSlicing\" is neither Exclusive nor Shared",
        ),
        (
            params(&json!({"mode": "Exclusive", "maxConsumers": 2})),
            "p.sharing.maxConsumers: must not be set when mode is Exclusive",
        ),
        (
            params(&json!({"mode": "Shared"})),
            "p.sharing.maxConsumers: required when mode is Shared",
        ),
        (
            params(&json!({"mode": "Shared", "maxConsumers": 0})),
            "p.sharing.maxConsumers: must be a whole number from 1 to 4294967295, got 0",
        ),
        (
            params(&json!({"mode": "Shared", "maxConsumers": "2"})),
            "p.sharing.maxConsumers: must be a whole number from 1 to 4294967295, got \"2\"",
        ),
        (
            params(&json!({"mode": "Shared", "maxConsumers": 2, "interval": "Long"})),
            "p.sharing.interval: unknown field (known: mode, maxConsumers)",
        ),
    ];
    for (parameters, expected) in cases {
        assert_eq!(error(&parameters).to_string(), expected, "{parameters}");
    }
}

#[test]
fn only_our_drivers_entries_are_read_and_a_bad_one_names_its_index() {
    let other = entry(
        "FromClaim",
        &[],
        "other.example.com",
        json!({"anything": true}),
    );
    let bad = entry("FromClaim", &[], DRIVER, json!({"kind": CONFIG_KIND}));
    let ours = our_configs(&allocation(vec![other.clone()]), DRIVER).unwrap();
    assert!(ours.is_empty(), "{ours:?}");
    let error = our_configs(&allocation(vec![other, bad]), DRIVER).unwrap_err();
    assert_eq!(
        error.field,
        "status.allocation.devices.config[1].opaque.parameters.apiVersion"
    );
    let odd_source = entry(
        "FromSomewhere",
        &[],
        DRIVER,
        params(&json!({"mode": "Exclusive"})),
    );
    let error = our_configs(&allocation(vec![odd_source]), DRIVER).unwrap_err();
    assert_eq!(error.field, "status.allocation.devices.config[0].source");
}

#[test]
fn claim_entries_win_over_class_entries_whatever_their_order_in_the_list() {
    let configs = our_configs(
        &allocation(vec![
            shared_entry("FromClaim", &[], 2),
            shared_entry("FromClass", &[], 8),
        ]),
        DRIVER,
    )
    .unwrap();
    assert_eq!(config_for("gpu", &configs).sharing, shared(2));
}

#[test]
fn within_one_source_the_later_entry_wins_as_a_whole() {
    let bare = json!({"apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND});
    let configs = our_configs(
        &allocation(vec![
            shared_entry("FromClaim", &[], 2),
            entry("FromClaim", &[], DRIVER, bare),
        ]),
        DRIVER,
    )
    .unwrap();
    assert_eq!(config_for("gpu", &configs).sharing, Sharing::Exclusive);
}

#[test]
fn an_entry_with_requests_applies_to_those_requests_and_their_subrequests_only() {
    let configs = our_configs(
        &allocation(vec![
            shared_entry("FromClass", &[], 8),
            shared_entry("FromClaim", &["big"], 2),
            entry(
                "FromClaim",
                &["small/one"],
                DRIVER,
                params(&json!({"mode": "Exclusive"})),
            ),
        ]),
        DRIVER,
    )
    .unwrap();
    assert_eq!(config_for("big", &configs).sharing, shared(2));
    assert_eq!(config_for("big/h100", &configs).sharing, shared(2));
    assert_eq!(
        config_for("small/one", &configs).sharing,
        Sharing::Exclusive
    );
    assert_eq!(config_for("small/two", &configs).sharing, shared(8));
    assert_eq!(config_for("other", &configs).sharing, shared(8));
    assert_eq!(config_for("x", &[]).sharing, Sharing::Exclusive);
}
